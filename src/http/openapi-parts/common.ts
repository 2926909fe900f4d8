import { idempotencyKeyPattern } from '../schemas.js';

// The pieces the core operations of the OpenAPI document share (Discovery, Orders, Services).

export const CLIENT_CAP_NOTE =
  'The official x402 client (@x402/fetch, @x402/axios, x402Client) refuses any payment above 1 USDC by default (spend control maxAmountPerPayment): ' +
  "many orders cost more, so raise it before paying, e.g. client.setSpendControls({ maxAmountPerPayment: '$20' }). The 402 message says so when the amount exceeds 1 USDC.";

export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('Error') } },
});
export const ok = (description: string, schemaName: string) => ({
  description,
  content: { 'application/json': { schema: ref(schemaName) } },
});
export const rateLimited = error(
  'rate_limited (too many requests from this address or API key; Retry-After says when to retry) or too_many_connections.',
);
export const unauthorized = error(
  'unauthorized: the Authorization header is missing, not "Bearer <AGENT_API_KEY>", or the key is unknown or revoked.',
);
export const storeUnavailable = error(
  'store_unavailable: the database did not answer. Usually nothing was changed; when the message says the change may or may not have been saved (its confirmation was lost), it may have been. Either way retry the same request, with the same Idempotency-Key, in a few seconds (retryable, Retry-After), or read the record.',
);
export const idempotencyHeader = (required: boolean) => ({
  name: 'Idempotency-Key',
  in: 'header',
  required,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: idempotencyKeyPattern },
  description: required
    ? 'Required. A new unique value (e.g. a UUID) per purchase. Reuse the same Idempotency-Key when you retry the same purchase: you get the same order back and are never charged twice.'
    : 'Optional. Reuse the same key when you retry: the same body returns the same quote; a different body with the same key is refused with 409.',
});
export const paymentSignatureHeader = {
  name: 'PAYMENT-SIGNATURE',
  in: 'header',
  required: false,
  schema: { type: 'string' },
  description:
    'x402 v2 payment payload, Base64-encoded JSON, built from the PAYMENT-REQUIRED of the 402 answer. It may carry the payment-identifier extension: the same id with the same payload returns the same order (under any Idempotency-Key of this API key); the same id with another payload or body is refused with 409 payment_id_conflict.',
};
export const paymentRequired = {
  description: `payment_required: pay as described in the PAYMENT-REQUIRED header (x402 v2, Base64 JSON, with the offer-receipt, payment-identifier and bazaar extensions; an order or extension also with refund, the terms of POST /x402/refund) and send the same request again with PAYMENT-SIGNATURE and the same Idempotency-Key. Also payment_invalid, payment_mismatch, payment_wrong_resource (the payment was made out for another resource than this header names), payment_rejected, payment_failed: nothing was charged; sign a new payment for the requirements in this header. ${CLIENT_CAP_NOTE}`,
  headers: {
    'PAYMENT-REQUIRED': { description: 'x402 v2 PaymentRequired, Base64-encoded JSON.', schema: { type: 'string' } },
  },
  content: { 'application/json': { schema: ref('PaymentRequired') } },
};
export const paidResponse = (description: string) => ({
  description,
  headers: {
    'PAYMENT-RESPONSE': {
      description:
        'x402 v2 settlement response, Base64-encoded JSON, with the operator-signed receipt (offer-receipt).',
      schema: { type: 'string' },
    },
  },
  content: { 'application/json': { schema: ref('OrderResponse') } },
});
