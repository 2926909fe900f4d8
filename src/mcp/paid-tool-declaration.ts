import type { PaymentTerms } from '../payments/index.js';
import { PAYMENT_META_KEY, PAYMENT_RESPONSE_META_KEY, toolResourceUrl, X402_VERSION } from './x402-binding.js';

/**
 * What a paid tool's tools/list entry declares in `_meta.x402`, so that a client knows before calling it that the
 * call is paid and how: `paymentRequired: true` (the flag MCP clients such as mcpc attach a payment by), the x402
 * version, the tool's resource (the PaymentRequired of a call that changes one service names that service too, e.g.
 * mcp://tool/extend_service?service_id=svc_…: see toolResourceUrl), and the payment terms in the field names of x402's
 * PaymentRequirements — without `amount`: the price depends on the arguments, so the client learns it from the
 * PaymentRequired of an unpaid call and signs for that (a client that finds no amount signs nothing ahead).
 */
export interface PaidToolDeclaration {
  paymentRequired: true;
  x402Version: typeof X402_VERSION;
  resource: { url: string; mimeType: 'application/json' };
  paymentMetaKey: typeof PAYMENT_META_KEY;
  paymentResponseMetaKey: typeof PAYMENT_RESPONSE_META_KEY;
  scheme?: 'exact';
  network?: string;
  asset?: string;
  payTo?: string;
  maxTimeoutSeconds?: number;
}

/** The `_meta` of a paid tool's tools/list entry; the terms are left out while machine payment is not configured. */
export function paidToolMeta(tool: string, terms: PaymentTerms | undefined): { x402: PaidToolDeclaration } {
  return {
    x402: {
      paymentRequired: true,
      x402Version: X402_VERSION,
      resource: { url: toolResourceUrl(tool), mimeType: 'application/json' },
      paymentMetaKey: PAYMENT_META_KEY,
      paymentResponseMetaKey: PAYMENT_RESPONSE_META_KEY,
      ...(terms && {
        scheme: 'exact',
        network: terms.network,
        asset: terms.asset,
        payTo: terms.payTo,
        maxTimeoutSeconds: terms.maxTimeoutSeconds,
      }),
    },
  };
}
