import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired, SettleResponse } from '@x402/core/types';
import type { ApiError } from '../errors/index.js';

/**
 * The x402 transport for MCP (x402 specs/transports-v2/mcp.md, tool-result binding) on top of the HTTP one the order
 * machinery speaks: the payload arrives as an object in params._meta["x402/payment"] and is handed on as the
 * PAYMENT-SIGNATURE header would carry it; PAYMENT-REQUIRED and PAYMENT-RESPONSE are decoded back into objects.
 */
export const PAYMENT_META_KEY = 'x402/payment';
export const PAYMENT_RESPONSE_META_KEY = 'x402/payment-response';

/** The PAYMENT-SIGNATURE form of the payload sent with a tool call, or undefined when the call carries none. */
export function paymentSignatureOf(meta: Record<string, unknown> | undefined): string | undefined {
  const payload = meta?.[PAYMENT_META_KEY];
  if (payload === undefined) return undefined;
  // Any other JSON value is encoded too: the order machinery refuses it as payment_invalid, with the requirements.
  return encodePaymentSignatureHeader(payload as never);
}

/** The PaymentRequired object of an error the REST API answers with a PAYMENT-REQUIRED header. */
export function paymentRequiredOf(error: ApiError): PaymentRequired | undefined {
  const header = error.options.headers?.['PAYMENT-REQUIRED'];
  return header ? decodePaymentRequiredHeader(header) : undefined;
}

export function settlementOf(paymentResponseHeader: string): SettleResponse {
  return decodePaymentResponseHeader(paymentResponseHeader);
}

/** The resource a paid tool is sold as (mcp://tool/order …), in PaymentRequired.resource and the receipt. */
export function toolResourceUrl(tool: string): string {
  return `mcp://tool/${tool}`;
}
