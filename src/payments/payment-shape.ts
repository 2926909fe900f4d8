import { cachedValidator } from '../schema/validator-cache.js';

const address = { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' };
const uint = { type: 'string', pattern: '^[0-9]{1,78}$' };
const text = { type: 'string', maxLength: 2048, pattern: '^[^\\u0000]*$' };

/**
 * An x402 v2 "exact" EVM payment as this service accepts it (EIP-3009 authorization), checked before anything reads
 * it: a payload that is not this shape is refused as invalid rather than reaching the facilitator or the database.
 */
const exactEvmPaymentSchema = {
  type: 'object',
  required: ['x402Version', 'accepted', 'payload'],
  properties: {
    x402Version: { const: 2 },
    resource: { type: 'object', properties: { url: text, description: text, mimeType: text } },
    accepted: {
      type: 'object',
      required: ['scheme', 'network', 'amount', 'asset', 'payTo', 'maxTimeoutSeconds'],
      properties: {
        scheme: text,
        network: text,
        amount: uint,
        asset: address,
        payTo: address,
        maxTimeoutSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
      },
    },
    payload: {
      type: 'object',
      required: ['signature', 'authorization'],
      properties: {
        signature: { type: 'string', pattern: '^0x[0-9a-fA-F]{130,2000}$' },
        authorization: {
          type: 'object',
          additionalProperties: false,
          required: ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'],
          properties: {
            from: address,
            to: address,
            value: uint,
            validAfter: uint,
            validBefore: uint,
            nonce: { type: 'string', pattern: '^0x[0-9a-fA-F]{64}$' },
          },
        },
      },
    },
  },
};

const exactEvmPaymentValidator = cachedValidator(exactEvmPaymentSchema);

/** Whether a payload has the exact EVM scheme's shape (the validator is compiled on the first payment seen). */
export function isExactEvmPayment(payload: unknown): boolean {
  return exactEvmPaymentValidator()(payload);
}

/**
 * What the accepted scheme calls the parts of a payment an agent may have to sign again, for messages that say what to
 * change: an exact EVM payment's EIP-3009 authorization names its expiry validBefore and its one-time reference nonce.
 */
export const AUTHORIZATION_FIELDS = { expiry: 'validBefore', reference: 'nonce' } as const;
