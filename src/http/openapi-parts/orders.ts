import type { Snapshot } from '../../pricing/index.js';
import {
  CLIENT_CAP_NOTE,
  error,
  idempotencyHeader,
  ok,
  paidResponse,
  paymentRequired,
  paymentSignatureHeader,
  rateLimited,
  ref,
  storeUnavailable,
  unauthorized,
} from './common.js';

/** x-payment-info of the paid operations: the payment protocol and the price range of the catalog's order limits. */
export function paymentInfoOf(snapshot: Snapshot): Record<string, unknown> {
  const { order_limits: limits } = snapshot.catalog.settings;
  return {
    protocol: 'x402',
    x402Version: 2,
    pricing_mode: 'dynamic',
    currency: limits.currency,
    minimum: limits.minimum,
    maximum: limits.maximum,
    network: 'eip155:8453',
    asset: 'USDC',
    // price.min/max and protocols as objects: the structured form discovery clients (agentcash) parse.
    price: {
      mode: 'dynamic',
      currency: limits.currency,
      min: limits.minimum,
      max: limits.maximum,
      minimum: limits.minimum,
      maximum: limits.maximum,
    },
    protocols: [{ x402: {} }],
  };
}

function createOrder(paymentInfo: Record<string, unknown>) {
  return {
    tags: ['Orders'],
    operationId: 'createOrder',
    summary: 'Order a product and pay with x402 v2.',
    // Spec 5.4: no security requirement of its own (the document's default applies); 401 stands for the bearer key.
    description:
      'Protected by your agent API key (send "Authorization: Bearer <AGENT_API_KEY>", as for POST /quotes) and confirmed by x402 v2 payment. First call without PAYMENT-SIGNATURE: the answer is 402 with a PAYMENT-REQUIRED header (Base64 JSON, x402 v2). Sign the payment with your wallet and send the same request again, with the same Idempotency-Key, adding the PAYMENT-SIGNATURE header. Nothing is provisioned before the payment is verified and settled. While machine payment is not configured on a deployment this answers 503. ' +
      CLIENT_CAP_NOTE,
    'x-payment-info': paymentInfo,
    parameters: [idempotencyHeader(true), paymentSignatureHeader],
    requestBody: { required: true, content: { 'application/json': { schema: ref('OrderRequest') } } },
    responses: {
      200: paidResponse('Paid and provisioned (or the same order again: idempotent_replay true).'),
      400: error(
        "idempotency_key_missing or malformed, payment_id_invalid (the payment-identifier breaks the extension's rules), bad_request.",
      ),
      401: unauthorized,
      402: paymentRequired,
      404: error('product_not_found: list the products with GET /products.'),
      409: error(
        'idempotency_key_reused, idempotency_in_progress (retryable), payment_already_used, ' +
          'payment_id_conflict, product_not_orderable, amount_out_of_range, quote_expired, quote_mismatch: ' +
          'conflict of state or idempotency; nothing was charged. order_refunded: paid but it could not be ' +
          'delivered; everything it paid is refunded (GET /orders/{order_id}).',
      ),
      413: error('body_too_large.'),
      415: error('unsupported_media_type: send Content-Type: application/json.'),
      422: error(
        'invalid_request / invalid_parameters / invalid_json / url_not_allowed / quote_not_found: error.details lists each problem with a JSON pointer.',
      ),
      429: error(
        'rate_limited, too_many_connections, or this API key (per_key_limit_reached) or paying address (per_payer_limit_reached) already holds as many live services or listener places as one buyer may: nothing was charged; error.details says the limits and what is in use, Retry-After when the next of your services expires.',
      ),
      503: error(
        'machine_payment_not_configured, capacity_exhausted (no free stream slot or listener ' +
          'places: retry later or ask for fewer listeners), capacity_reserved (only the part of the host kept ' +
          'for wallets with paid history is free, agent_checkout.capacity_reserve of /availability: retry ' +
          'later, ask for fewer listeners, or pay from an established wallet; nothing was charged, ' +
          'error.details.history says what the wallet has paid), payment_network_unavailable, ' +
          'settlement_pending, provisioning_pending (paid, not provisioned yet: retry the same request; ' +
          'refunded in full if never), store_unavailable (retryable).',
      ),
    },
  };
}

const orderLookup = {
  get: {
    tags: ['Orders'],
    operationId: 'getOrder',
    summary: 'An order of yours, with its service.',
    security: [{ agentApiKey: [] }],
    parameters: [
      {
        name: 'order_id',
        in: 'path',
        required: true,
        schema: { type: 'string', pattern: '^ra_[a-zA-Z0-9_-]{8,120}$' },
      },
    ],
    responses: {
      200: ok('The order and its service', 'OrderLookup'),
      401: unauthorized,
      404: error('order_not_found: no such order for this API key.'),
      429: rateLimited,
      503: storeUnavailable,
    },
  },
};

/** The Orders tag's paths: placing an order paid with x402, and reading one. */
export function orderPaths(paymentInfo: Record<string, unknown>) {
  return { '/orders': { post: createOrder(paymentInfo) }, '/orders/{order_id}': orderLookup };
}
