import {
  decodePaymentRequiredHeader,
  decodePaymentResponseHeader,
  encodePaymentSignatureHeader,
} from '@x402/core/http';
import type { PaymentRequired, SettleResponse } from '@x402/core/types';
import { ApiError } from '../errors/index.js';

/**
 * The x402 transport for MCP (x402 specs/transports-v2/mcp.md, tool-result binding) on top of the HTTP one the order
 * machinery speaks: the payload arrives as an object in params._meta["x402/payment"] and is handed on as the
 * PAYMENT-SIGNATURE header would carry it; PAYMENT-REQUIRED and PAYMENT-RESPONSE are decoded back into objects.
 */
export const PAYMENT_META_KEY = 'x402/payment';
export const PAYMENT_RESPONSE_META_KEY = 'x402/payment-response';
export const X402_VERSION = 2;

/** Where other x402 clients put a payment: v1's `_meta["x402.payment"]`, the early `x402.org/payment`, and kin. */
const OTHER_META_KEY = /^x402(?:\.org)?[./_-]?payment$/i;
/** The HTTP transport's payment headers (v2 and v1), which an MCP request may carry by mistake. */
export const HTTP_PAYMENT_HEADERS = ['PAYMENT-SIGNATURE', 'X-PAYMENT'];

/**
 * The PAYMENT-SIGNATURE form of the payload sent with a call of a paid tool, or undefined when the call carries none.
 * A payment sent anywhere else (an HTTP header, another _meta key) or in x402 v1 is refused before anything is priced
 * or charged, with a message that says where and in what form the payment goes.
 */
export function paymentOfCall(
  tool: string,
  meta: Record<string, unknown> | undefined,
  httpHeader: string | undefined,
): string | undefined {
  const payload = meta?.[PAYMENT_META_KEY];
  if (payload !== undefined) {
    const version = x402VersionOf(payload);
    if (version !== undefined && version !== X402_VERSION) {
      throw misplaced(tool, `The payment in params._meta["${PAYMENT_META_KEY}"] is an x402Version ${version} payload`);
    }
    // Any other JSON value is encoded too: the order machinery refuses it as payment_invalid, with the requirements.
    return encodePaymentSignatureHeader(payload as never);
  }
  const otherKey = Object.keys(meta ?? {}).find((key) => OTHER_META_KEY.test(key));
  if (otherKey) {
    const version = x402VersionOf(meta![otherKey]);
    const asVersion = version === undefined ? '' : ` as an x402Version ${version} payload`;
    throw misplaced(tool, `The payment came in params._meta[${JSON.stringify(otherKey)}]${asVersion}`);
  }
  if (httpHeader) {
    throw misplaced(tool, `The payment came in the ${httpHeader} HTTP header, which is how x402 pays over plain HTTP`);
  }
  return undefined;
}

function misplaced(tool: string, what: string): ApiError {
  return new ApiError(
    400,
    'payment_not_in_meta',
    `${what}; nothing was charged. Over MCP this server takes x402Version ${X402_VERSION} only, in the tools/call ` +
      `request itself: put the PaymentPayload object (x402Version ${X402_VERSION}, signed for one of the ` +
      `accepts of the ` +
      `PaymentRequired that the ${tool} tool returns when called without a payment) in ` +
      `params._meta["${PAYMENT_META_KEY}"], and call the ${tool} tool again with the same arguments (the same ` +
      'idempotency_key).',
  );
}

/** The x402Version of a payload, an object or the Base64 JSON of a payment header; undefined when unreadable. */
function x402VersionOf(payload: unknown): unknown {
  let value = payload;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
    } catch {
      return undefined;
    }
  }
  return value !== null && typeof value === 'object' && 'x402Version' in value ? value.x402Version : undefined;
}

/** The PaymentRequired object of an error the REST API answers with a PAYMENT-REQUIRED header. */
export function paymentRequiredOf(error: ApiError): PaymentRequired | undefined {
  const header = error.options.paymentRequired;
  return header ? decodePaymentRequiredHeader(header) : undefined;
}

export function settlementOf(paymentResponseHeader: string): SettleResponse {
  return decodePaymentResponseHeader(paymentResponseHeader);
}

/**
 * The resource a paid tool is sold as, in PaymentRequired.resource and the receipt: the tool (mcp://tool/order), and
 * for a tool that changes one service, that service too (mcp://tool/extend_service?service_id=svc_…), as the REST
 * path names it (/services/{service_id}/extend): a payment made out for one service's extension or upgrade does not
 * pay another's. tools/list declares the tool's own (mcp://tool/extend_service), before any service is named.
 */
export function toolResourceUrl(tool: string, serviceId?: string): string {
  const base = `mcp://tool/${tool}`;
  return serviceId === undefined ? base : `${base}?service_id=${encodeURIComponent(serviceId)}`;
}
