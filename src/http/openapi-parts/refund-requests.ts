/** POST /x402/refund and GET /x402/refund/{idempotency_key}: refunds in the form of x402's proposed refund extension. */
import { refundRequestSchema } from '../../refunds/index.js';
import { refundSchema } from '../response-schemas.js';
import type { OpenApiPart } from './part.js';

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const error = (description: string) => ({ description, content: { 'application/json': { schema: ref('Error') } } });
// A denial is the error document with the proposal's fields beside it (status "denied", amount, denialReason,
// idempotencyKey); every 4xx of the document references Error.
const denied = (description: string) =>
  error(`${description} Beside the error document: status "denied", amount (requested), denialReason, idempotencyKey.`);
const answered = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('RefundAnswer') } },
});
const tags = ['Refunds'];

const answer = {
  type: 'object',
  required: ['ok', 'status', 'amount', 'idempotencyKey', 'order_id', 'service_id', 'refund', 'idempotent_replay'],
  properties: {
    ok: { const: true },
    status: { enum: ['executed', 'pending'], description: 'executed: proven sent on chain; pending: not yet.' },
    amount: { type: 'string', description: 'Atomic USDC refunded to the payer (the stop refund, rules/refunds.json).' },
    refundTxHash: { type: 'string', description: 'executed only: the refund transfer.' },
    refundReceipt: {
      type: 'object',
      required: ['format', 'signature'],
      properties: { format: { const: 'jws' }, signature: { type: 'string' } },
      description: 'executed only: the operator-signed refund receipt (offer-receipt artifact, kind "refund").',
    },
    idempotencyKey: { type: 'string' },
    order_id: { type: ['string', 'null'] },
    service_id: { type: ['string', 'null'] },
    refund: refundSchema,
    idempotent_replay: { type: 'boolean' },
  },
};

const common = {
  409: denied(
    'Denied (outside_window: the service no longer runs; amount_exceeds_settled; already_refunded: nothing left for this wallet), or idempotency_key_reused, or payment_not_delivered_yet (retryable).',
  ),
  429: error('rate_limited: too many requests from this address; Retry-After says when to retry.'),
  503: error('stop_not_available: refunds are not offered on this deployment right now (retryable).'),
};

export const part: OpenApiPart = {
  tags: [
    {
      name: 'Refunds',
      description:
        'Refunds in the form of the x402 refund extension proposal (x402-foundation/x402 specs/extensions/refund.md, not merged): order and extension 402s advertise extensions.refund; the payer signs a refund request and gets the stop refund.',
    },
  ],
  paths: {
    '/x402/refund': {
      post: {
        tags,
        operationId: 'requestRefund',
        summary: 'Ask for a refund as the payer (x402 refund extension proposal): stops the service, refunds on chain',
        description:
          "Send the proposal's RefundRequest signed by the wallet that paid (EIP-712, docs/api.md). It stops the service the payment bought as POST /services/{service_id}/stop does; the refund is its unused share. The same idempotencyKey answers the same result.",
        security: [{}],
        requestBody: { required: true, content: { 'application/json': { schema: ref('RefundRequest') } } },
        responses: {
          200: answered('executed: the refund is proven sent on chain.'),
          202: answered('pending: stopped, refund not sent yet; GET /x402/refund/{idempotency_key} until executed.'),
          403: denied(
            'Denied: not_payer (the signature is not the payer) or policy_denied (expired, refundTo, not the owner).',
          ),
          404: denied('Denied: unknown_payment (no payment to us settled by this transaction on this network).'),
          422: error('invalid_request: the body is not a RefundRequest (error.details lists each problem).'),
          ...common,
        },
      },
    },
    '/x402/refund/{idempotency_key}': {
      get: {
        tags,
        operationId: 'refundRequestStatus',
        summary: 'The answer to a refund request, now (pending turns executed once proven sent)',
        security: [{}],
        parameters: [
          { name: 'idempotency_key', in: 'path', required: true, schema: { type: 'string', maxLength: 255 } },
        ],
        responses: {
          200: answered('executed.'),
          202: answered('pending.'),
          403: denied('The request was denied (not_payer, policy_denied).'),
          404: error('refund_request_not_found, or the request was denied as unknown_payment.'),
          ...common,
        },
      },
    },
  },
  schemas: { RefundRequest: refundRequestSchema, RefundAnswer: answer },
};
