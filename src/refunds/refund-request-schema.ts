/** The proposal's reason codes (x402 specs/extensions/refund.md). */
export const REFUND_REASONS = [
  'service_not_delivered',
  'service_defective',
  'duplicate_payment',
  'overcharge',
  'customer_request',
  'other',
] as const;

/** The body of POST /x402/refund: the proposal's RefundRequest, plus validBefore (ours, optional, signed). */
export const refundRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['x402Version', 'paymentReference', 'amount', 'reason', 'idempotencyKey', 'payerSignature'],
  properties: {
    x402Version: { const: 2 },
    paymentReference: {
      type: 'object',
      additionalProperties: false,
      required: ['txHash', 'network'],
      properties: {
        txHash: { type: 'string', pattern: '^0x[0-9a-fA-F]{64}$', description: 'The settlement transaction.' },
        network: { type: 'string', pattern: '^eip155:[1-9][0-9]{0,15}$', description: 'CAIP-2, e.g. eip155:8453.' },
        paymentId: { type: 'string', minLength: 1, maxLength: 128 },
      },
    },
    amount: {
      type: 'string',
      pattern: '^(0|[1-9][0-9]{0,29})$',
      description: 'Atomic units; at most what the payment settled. What comes back is the stop refund.',
    },
    reason: { enum: [...REFUND_REASONS] },
    reasonDetail: { type: 'string', maxLength: 1000 },
    refundTo: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$', description: 'Absent or the payer.' },
    idempotencyKey: { type: 'string', pattern: '^[\\x21-\\x7E]{1,255}$', description: 'A new UUID per request.' },
    receipt: { type: 'object', description: 'The offer-receipt of the payment (not required).' },
    validBefore: {
      type: 'integer',
      minimum: 0,
      maximum: 1e15,
      description: 'Unix seconds after which the request is refused (signed; absent or 0: no expiry).',
    },
    payerSignature: {
      type: 'string',
      pattern: '^0x[0-9a-fA-F]{130,4096}$',
      description: 'EIP-712 signature by the payer over the request (docs/api.md gives the typed data).',
    },
  },
} as const;
