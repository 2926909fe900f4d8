/** The extension's key in a PaymentRequired's extensions (x402 specs/extensions/refund.md, a proposal). */
export const REFUND_EXTENSION = 'refund';

/** The refund terms a 402 advertises, in the proposal's fields. */
export interface RefundTermsInfo {
  /** Where refund requests are POSTed. */
  refundEndpoint: string;
  /** How long after settlement a refund may be requested (0: none). */
  windowSeconds: number;
  /** Whether less than the whole settled amount may come back. */
  partialRefunds: boolean;
}

// Kept to what a client checks: a PAYMENT-REQUIRED header over 8 KiB is cut by common proxies' header buffers.
const schema = {
  type: 'object',
  properties: {
    refundEndpoint: { type: 'string' },
    windowSeconds: { type: 'integer', minimum: 0 },
    partialRefunds: { type: 'boolean' },
  },
  required: ['refundEndpoint', 'windowSeconds', 'partialRefunds'],
};

/** The extension as the 402's extensions carry it: the terms (info) and their JSON Schema. */
export function declareRefundExtension(
  info: RefundTermsInfo,
): Record<string, { info: RefundTermsInfo; schema: object }> {
  return { [REFUND_EXTENSION]: { info, schema } };
}
