import { parametersSchema, type CatalogProduct } from '../catalog/index.js';
import { SnapshotCache, type BillingOption, type Snapshot } from '../pricing/index.js';
import { openApiParts } from './openapi-parts/index.js';
import { billingSchema, orderableProducts } from './paid-operations.js';
import { freeFormObjectsOpen, productVariants, withoutDefaults } from './openapi-typed.js';
import {
  auditHeadSchema,
  availabilitySchema,
  deletedFileResponseSchema,
  filesResponseSchema,
  healthSchema,
  orderLookupSchema,
  orderResponseSchema,
  orderSchema,
  playlistResponseSchema,
  pricingSchema,
  serviceResponseSchema,
  serviceSchema,
  stopResponseSchema,
  storedFileResponseSchema,
  usageResponseSchema,
  paymentRequiredBodySchema,
  paymentRequirementsSchema,
  wellKnownX402Schema,
} from './response-schemas.js';
import {
  errorSchema,
  extendRequestSchema,
  idempotencyKeyPattern,
  orderRequestSchema,
  playlistSchema,
  upgradeRequestSchema,
  productIdPattern,
  productSchema,
  quoteRequestSchema,
  quoteResponseSchema,
} from './schemas.js';

const cache = new SnapshotCache<Buffer>();

const CLIENT_CAP_NOTE =
  'The official x402 client (@x402/fetch, @x402/axios, x402Client) refuses any payment above 1 USDC by default (spend control maxAmountPerPayment): ' +
  "many orders cost more, so raise it before paying, e.g. client.setSpendControls({ maxAmountPerPayment: '$20' }). The 402 message says so when the amount exceeds 1 USDC.";

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const error = (description: string) => ({ description, content: { 'application/json': { schema: ref('Error') } } });
const ok = (description: string, schemaName: string) => ({
  description,
  content: { 'application/json': { schema: ref(schemaName) } },
});
const rateLimited = error(
  'rate_limited (too many requests from this address or API key; Retry-After says when to retry) or too_many_connections.',
);
const unauthorized = error(
  'unauthorized: the Authorization header is missing, not "Bearer <AGENT_API_KEY>", or the key is unknown or revoked.',
);
const storeUnavailable = error(
  'store_unavailable: the database did not answer. Usually nothing was changed; when the message says the change may or may not have been saved (its confirmation was lost), it may have been. Either way retry the same request, with the same Idempotency-Key, in a few seconds (retryable, Retry-After), or read the record.',
);
const idempotencyHeader = (required: boolean) => ({
  name: 'Idempotency-Key',
  in: 'header',
  required,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: idempotencyKeyPattern },
  description: required
    ? 'Required. A new unique value (e.g. a UUID) per purchase. Reuse the same Idempotency-Key when you retry the same purchase: you get the same order back and are never charged twice.'
    : 'Optional. Reuse the same key when you retry: the same body returns the same quote; a different body with the same key is refused with 409.',
});
const paymentSignatureHeader = {
  name: 'PAYMENT-SIGNATURE',
  in: 'header',
  required: false,
  schema: { type: 'string' },
  description:
    'x402 v2 payment payload, Base64-encoded JSON, built from the PAYMENT-REQUIRED of the 402 answer. It may carry the payment-identifier extension: the same id with the same payload returns the same order (under any Idempotency-Key of this API key); the same id with another payload or body is refused with 409 payment_id_conflict.',
};
const paymentRequired = {
  description: `payment_required: pay as described in the PAYMENT-REQUIRED header (x402 v2, Base64 JSON, with the offer-receipt, payment-identifier and bazaar extensions) and send the same request again with PAYMENT-SIGNATURE and the same Idempotency-Key. Also payment_invalid, payment_mismatch, payment_wrong_resource (the payment was made out for another resource than this header names), payment_rejected, payment_failed: nothing was charged; sign a new payment for the requirements in this header. ${CLIENT_CAP_NOTE}`,
  headers: {
    'PAYMENT-REQUIRED': { description: 'x402 v2 PaymentRequired, Base64-encoded JSON.', schema: { type: 'string' } },
  },
  content: { 'application/json': { schema: ref('PaymentRequired') } },
};
const paidResponse = (description: string) => ({
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

/** OpenAPI 3.1, generated from the schemas the server validates with and the catalog being served. */
export function openApiDocument(snapshot: Snapshot, version: string, billing?: Map<string, BillingOption[]>): Buffer {
  return cache.get(snapshot, () => Buffer.from(JSON.stringify(buildOpenApiDocument(snapshot, version, billing))));
}

/** The document as an object (for the offline lint: npm run lint:openapi). */
export function buildOpenApiDocument(
  snapshot: Snapshot,
  version: string,
  billing?: Map<string, BillingOption[]>,
): Record<string, unknown> {
  return freeFormObjectsOpen(build(snapshot, version, billing));
}

function build(snapshot: Snapshot, version: string, billing?: Map<string, BillingOption[]>) {
  const { order_limits: limits } = snapshot.catalog.settings;
  // Subscriptions are quoted too (monthly or annual); products planned or with pricing pending are not.
  const quotable = snapshot.catalog.products.filter((p) => !snapshot.verdicts.get(p.product.id)!.rejection);
  const schemaName = (id: string) => `Parameters_${id.replace(/-/g, '_')}`;
  const parameterSchemas = Object.fromEntries(
    quotable.map((p) => [
      schemaName(p.product.id),
      withoutDefaults({
        ...parametersSchema(p.acceptedParameters),
        description: `parameters for product_id "${p.product.id}"`,
      }),
    ]),
  );
  const orderableIds = orderableProducts(snapshot).map((p) => p.id);
  const variant = (id: string, billings: (p: CatalogProduct) => string[]) => {
    const product = snapshot.catalog.byId.get(id)!;
    const subscription = product.product.billing_type === 'subscription';
    return {
      id,
      parameters: ref(schemaName(id)),
      parametersRequired: Object.values(product.acceptedParameters).some((d) => d.required),
      billings: billings(product),
      billingRequired: subscription,
    };
  };
  const billingsOf = (p: CatalogProduct) =>
    p.product.billing_type === 'subscription' ? ['monthly', 'annual'] : ['one_time', 'quote'];
  const orderableBillingsOf = (p: CatalogProduct) => {
    const offered = billing
      ?.get(p.product.id)
      ?.filter((o) => o.agent_orderable)
      .map((o) => o.billing);
    return offered?.length ? offered : billingsOf(p);
  };
  const { additionalProperties: _q, ...quoteBase } = quoteRequestSchema;
  const { additionalProperties: _o, ...orderBase } = orderRequestSchema;
  const paymentInfo = {
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
  const parts = openApiParts;
  return {
    openapi: '3.1.0',
    info: {
      title: 'Agent Audio Infrastructure API',
      version: '1.0.0',
      'x-service-version': version,
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      description:
        'Buy live audio streams and temporary AutoDJ as a software agent and pay with x402 v2 (USDC on Base). ' +
        'Typical flow: GET /products → POST /quotes (exact USDC price) → POST /orders (answers 402 with PAYMENT-REQUIRED; pay and send the same request again with PAYMENT-SIGNATURE and the same Idempotency-Key). ' +
        `${CLIENT_CAP_NOTE} ` +
        'x402 discovery: /.well-known/x402 (draft manifest) and the bazaar extension on every 402. ' +
        'Every error is {ok:false, error:{code, message, retryable, request_id}}; the message says what to do next. Browsers may call every operation (CORS; PAYMENT-REQUIRED, PAYMENT-RESPONSE and X-Request-Id are exposed).',
    },
    servers: [{ url: '/api/v1' }],
    // The default for an operation that states none: POST /orders (spec 5.4: no security requirement of its own).
    security: [{ agentApiKey: [] }],
    tags: [
      { name: 'Discovery', description: 'Catalog, prices, availability and quotes.' },
      { name: 'Orders', description: 'Orders secured by a bearer key and confirmed by x402 v2 payment.' },
      { name: 'Services', description: 'State, usage and life cycle of a provisioned service.' },
      ...parts.flatMap((p) => p.tags ?? []),
    ],
    components: {
      securitySchemes: {
        agentApiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'agent-api-key',
          description: 'Send "Authorization: Bearer <AGENT_API_KEY>".',
        },
        ...Object.assign({}, ...parts.map((p) => p.securitySchemes)),
      },
      schemas: {
        Error: errorSchema,
        PaymentRequired: paymentRequiredBodySchema(errorSchema),
        PaymentRequirements: paymentRequirementsSchema,
        Product: productSchema,
        ProductList: {
          type: 'object',
          required: ['ok', 'catalog_version', 'count', 'products'],
          properties: {
            ok: { const: true },
            catalog_version: { type: 'integer' },
            count: { type: 'integer' },
            products: { type: 'array', items: ref('Product') },
          },
        },
        ProductResponse: {
          type: 'object',
          required: ['ok', 'product'],
          properties: { ok: { const: true }, product: ref('Product') },
        },
        Health: healthSchema,
        Pricing: pricingSchema,
        Availability: availabilitySchema,
        QuoteRequest: {
          ...quoteBase,
          properties: {
            product_id: { ...quoteRequestSchema.properties.product_id, enum: quotable.map((p) => p.product.id) },
          },
          description:
            'One variant per product: parameters follow the Parameters_* schema of the product_id; billing monthly or annual for a subscription.',
          oneOf: productVariants(
            quoteRequestSchema,
            quotable.map((p) => variant(p.product.id, billingsOf)),
          ),
        },
        QuoteResponse: quoteResponseSchema,
        OrderRequest: {
          ...orderBase,
          properties: {
            product_id: { ...orderRequestSchema.properties.product_id, enum: orderableIds },
            billing: withoutDefaults(billingSchema(orderableIds, billing)),
          },
          description:
            'One variant per orderable product: parameters follow the Parameters_* schema of the product_id.',
          oneOf: productVariants(
            orderRequestSchema,
            orderableIds.map((id) => variant(id, orderableBillingsOf)),
          ),
        },
        Order: orderSchema,
        Service: serviceSchema,
        OrderResponse: {
          ...orderResponseSchema,
          properties: { ...orderResponseSchema.properties, order: ref('Order'), service: ref('Service') },
        },
        OrderLookup: {
          ...orderLookupSchema,
          properties: {
            ...orderLookupSchema.properties,
            order: ref('Order'),
            service: { oneOf: [ref('Service'), { type: 'null' }] },
          },
        },
        ServiceResponse: {
          ...serviceResponseSchema,
          properties: { ...serviceResponseSchema.properties, service: ref('Service') },
        },
        Usage: usageResponseSchema,
        StopResponse: stopResponseSchema,
        Files: filesResponseSchema,
        StoredFile: storedFileResponseSchema,
        DeletedFile: deletedFileResponseSchema,
        Playlist: playlistSchema,
        PlaylistResponse: playlistResponseSchema,
        UpgradeRequest: upgradeRequestSchema,
        ExtendRequest: extendRequestSchema,
        AuditHead: auditHeadSchema,
        WellKnownX402: wellKnownX402Schema,
        ...parameterSchemas,
        ...Object.assign({}, ...parts.map((p) => p.schemas)),
      },
    },
    paths: {
      ...discoveryPaths(),
      '/orders': {
        post: {
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
        },
      },
      '/orders/{order_id}': {
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
      },
      ...servicePaths(paymentInfo),
      ...Object.assign({}, ...parts.map((p) => p.paths)),
    },
  };
}

function discoveryPaths() {
  const open = { security: [] as unknown[], tags: ['Discovery'] };
  return {
    '/health': {
      get: {
        ...open,
        operationId: 'getHealth',
        summary: 'Whether the service and its payment path work, its version, catalog hash and links.',
        responses: { 200: ok('Health', 'Health'), 429: rateLimited },
      },
    },
    '/products': {
      get: {
        ...open,
        operationId: 'listProducts',
        summary: 'Every product with its parameters, limits and payment methods.',
        responses: { 200: ok('The products', 'ProductList'), 429: rateLimited },
      },
    },
    '/products/{product_id}': {
      get: {
        ...open,
        operationId: 'getProduct',
        summary: 'One product.',
        parameters: [
          { name: 'product_id', in: 'path', required: true, schema: { type: 'string', pattern: productIdPattern } },
        ],
        responses: {
          200: ok('Product', 'ProductResponse'),
          404: error('product_not_found: list them with GET /products.'),
          429: rateLimited,
        },
      },
    },
    '/pricing': {
      get: {
        ...open,
        operationId: 'getPricing',
        summary: 'Current prices and products in preparation.',
        responses: { 200: ok('Pricing', 'Pricing'), 429: rateLimited },
      },
    },
    '/availability': {
      get: {
        ...open,
        operationId: 'getAvailability',
        summary:
          'Which products an agent can order now (the host has room for them), and whether machine checkout is configured.',
        parameters: [
          {
            name: 'listeners',
            in: 'query',
            required: false,
            description:
              'The listener places you mean to buy: available_now then says whether the host has room for that many.',
            schema: { type: 'integer', minimum: 1 },
          },
        ],
        responses: {
          200: ok('Availability', 'Availability'),
          400: error('invalid_query: listeners must be a whole number, 1 or more.'),
          429: rateLimited,
        },
      },
    },
    '/quotes': {
      post: {
        tags: ['Discovery'],
        operationId: 'createQuote',
        summary: 'Exact USDC price of a configuration, with breakdown and expiry. Creates no order.',
        description:
          'Amounts are decimal strings (amount) and integer strings of atomic units (amount_atomic, 6 decimals). Each price line is rounded up to a whole atomic unit.',
        security: [{ agentApiKey: [] }],
        parameters: [idempotencyHeader(false)],
        requestBody: { required: true, content: { 'application/json': { schema: ref('QuoteRequest') } } },
        responses: {
          200: ok('The quote', 'QuoteResponse'),
          401: unauthorized,
          404: error('product_not_found.'),
          409: error(
            'product_not_quotable and similar (planned, pricing pending) or idempotency_key_reused (the Idempotency-Key was used for another body).',
          ),
          413: error('body_too_large.'),
          415: error('unsupported_media_type: the body is not JSON.'),
          422: error(
            'invalid_parameters and similar (error.details lists each with a JSON pointer) or a malformed Idempotency-Key.',
          ),
          429: rateLimited,
          503: storeUnavailable,
        },
      },
    },
    '/audit/head': {
      get: {
        ...open,
        operationId: 'getAuditHead',
        summary: 'The latest audit chain head, signed with the operator key (Ed25519), and the public key.',
        description:
          'Keep it: `agent-audio audit verify --head FILE` or an exported bundle later proves that the log up to this seq was not rewritten.',
        responses: {
          200: ok('signed_head, key_id, public_key', 'AuditHead'),
          429: rateLimited,
          503: error('audit_signing_not_configured: no operator signing key on this deployment.'),
        },
      },
    },
    '/openapi.json': {
      get: {
        ...open,
        operationId: 'getOpenApi',
        summary: 'This document.',
        responses: {
          200: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object' } } } },
          429: rateLimited,
        },
      },
    },
    '/.well-known/x402': {
      servers: [{ url: '/' }],
      get: {
        ...open,
        operationId: 'getX402Discovery',
        summary:
          'x402 discovery manifest (draft): the paid operations, their networks, asset, receiver and price range.',
        description:
          'Served at the site root. Follows the draft of x402-foundation/x402 specs/extensions/well-known-discovery.md (also at /.well-known/x402.json). Advisory: the live 402 is authoritative for the amount.',
        responses: { 200: ok('The manifest', 'WellKnownX402'), 429: rateLimited },
      },
    },
  };
}

function servicePaths(paymentInfo: Record<string, unknown>) {
  const id = {
    name: 'service_id',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' },
    description: 'service.service_id from your order.',
  };
  const name = {
    name: 'name',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._ ()-]{0,127}$' },
  };
  // The key it was ordered with, or the wallet that paid for it, signed in (see the Keys tag).
  // {}: without credentials the answer is the 402 sign-in challenge, not a refusal.
  const owner = { security: [{ agentApiKey: [] }, { walletSignIn: [] }, {}], tags: ['Services'] };
  const notFound = error(
    "service_not_found: no such service for this API key or wallet (another buyer's service looks the same as none).",
  );
  const signIn = {
    description:
      'authentication_required: no credentials were sent. PAYMENT-REQUIRED carries an x402 v2 PaymentRequired with extensions["sign-in-with-x"] (a challenge for this method and path) and an accepts entry that only names the chain (nothing to pay): sign it with the wallet that paid and send the same request again with SIGN-IN-WITH-X, or send your API key.',
    headers: {
      'PAYMENT-REQUIRED': {
        description: 'x402 v2 PaymentRequired (sign-in only), Base64-encoded JSON.',
        schema: { type: 'string' },
      },
    },
    content: { 'application/json': { schema: ref('PaymentRequired') } },
  };
  const common = { 401: unauthorized, 402: signIn, 404: notFound, 429: rateLimited, 503: storeUnavailable };
  const noStorage = error('storage_not_included (the service has no AutoDJ storage) or service_not_active.');
  return {
    '/services/{service_id}': {
      get: {
        ...owner,
        operationId: 'getService',
        summary:
          'The service record: status, stream and broadcast URLs, limits, expiry; status_reason when something was enforced.',
        parameters: [id],
        responses: { 200: ok('The service', 'ServiceResponse'), ...common },
      },
    },
    '/services/{service_id}/upgrade': {
      post: {
        ...owner,
        operationId: 'upgradeService',
        parameters: [
          id,
          {
            ...idempotencyHeader(true),
            description: 'A new value per upgrade; reuse it when you retry the same upgrade.',
          },
          paymentSignatureHeader,
        ],
        summary:
          'Turn the service into another product for the rest of its paid time (e.g. instant-stream → event-stream), paid with x402 exactly like an order.',
        description: `First call: 402 with PAYMENT-REQUIRED. The price is the target product for the remaining time (its transfer renewed) minus the unused current time, at least the order minimum. Applied without disconnecting the source or listeners; a suspended service becomes active again. ${CLIENT_CAP_NOTE}`,
        'x-payment-info': paymentInfo,
        requestBody: { required: true, content: { 'application/json': { schema: ref('UpgradeRequest') } } },
        responses: {
          200: paidResponse('The order and the upgraded service.'),
          400: error('idempotency_key_missing or malformed, payment_id_invalid.'),
          409: error(
            'upgrade_not_possible, upgrade_changes_nothing, upgrade_in_progress (another upgrade of the ' +
              'service is being paid), service_changed, idempotency_key_reused, payment_id_conflict, ' +
              'payment_already_used. Nothing is charged. Paid but settled after a stop: service_stopped or ' +
              'order_refunded (refunded in full).',
          ),
          422: error('invalid_request: error.details points at the problem.'),
          ...common,
          402: paymentRequired,
          503: error(
            'machine_payment_not_configured, payment_network_unavailable, settlement_pending, ' +
              'provisioning_pending (paid, not provisioned yet: retry the same request; refunded in full if ' +
              'never), store_unavailable (retryable).',
          ),
        },
      },
    },
    '/services/{service_id}/extend': {
      post: {
        ...owner,
        operationId: 'extendService',
        parameters: [
          id,
          {
            ...idempotencyHeader(true),
            description: 'A new value per extension; reuse it when you retry the same extension.',
          },
          paymentSignatureHeader,
        ],
        summary:
          'Add paid hours to the service: its expiry moves from the current expiry (never from now), paid with x402 exactly like an order.',
        description:
          "First call: 402 with PAYMENT-REQUIRED naming the price. The price comes from the product's own pricing: its price for the new total of hours minus its price for the hours already paid " +
          '(a formula product: the added hours at its hourly rate; a package product: the package covering the new total minus the one paid), at least the order minimum and at most the order maximum. ' +
          "The hours over the service's whole life may not pass its product's maximum duration_hours. Applied at once: the source and listeners stay connected past the old expiry. " +
          "An expired service can be extended within the catalog's grace period (24 h unless the catalog says otherwise): it comes back on the same mount with the same credentials. " +
          `service.expiring events name this operation and the price of one more hour; service.extended is sent when it is applied. ${CLIENT_CAP_NOTE}`,
        'x-payment-info': paymentInfo,
        requestBody: { required: true, content: { 'application/json': { schema: ref('ExtendRequest') } } },
        responses: {
          200: paidResponse('The order (extension_of, configuration.duration_hours) and the extended service.'),
          400: error('idempotency_key_missing or malformed, payment_id_invalid.'),
          409: error(
            'service_stopped (it was stopped and refunded), extension_grace_over, extension_too_long (the ' +
              "product's maximum duration), extension_not_possible, amount_out_of_range, extension_in_progress, " +
              'upgrade_in_progress, service_changed, idempotency_key_reused, payment_id_conflict, ' +
              'payment_already_used. Nothing is charged. Paid but settled after a stop: service_stopped or ' +
              'order_refunded (refunded in full).',
          ),
          422: error(
            "invalid_request: error.details points at the problem. extension_too_short: below the product's minimum " +
              'duration_hours (error.details gives it); nothing is charged.',
          ),
          ...common,
          402: paymentRequired,
          503: error(
            'machine_payment_not_configured, payment_network_unavailable, settlement_pending, ' +
              'provisioning_pending (paid, not provisioned yet: retry the same request; refunded in full if ' +
              'never), store_unavailable (retryable).',
          ),
        },
      },
    },
    '/services/{service_id}/stop': {
      post: {
        ...owner,
        operationId: 'stopService',
        parameters: [id],
        summary: 'Stop the service now and get the unused share of what was paid back in USDC.',
        description:
          'The service ends at once (status expired, for good): its mount, source and listeners are cut and its credentials refused. ' +
          'Then the refund is computed (rules/refunds.json: the base fee kept once, every unused paid hour back at the rate it was bought, less the transfer used, nothing below the minimum) ' +
          "and sent to the wallet that paid, from the operator's refund wallet; it is pending until its transfer is proven on chain, then sent with its transaction and a receipt signed with the operator key. " +
          'No body: the destination is never taken from the request. Stopping again returns the same refund and receipt (idempotent_replay true).',
        responses: {
          200: ok('The stopped service, why it ended, and its refund.', 'StopResponse'),
          409: error(
            'service_not_running: the service already ended (expired or failed); there is nothing to stop or refund.',
          ),
          ...common,
        },
      },
    },
    '/services/{service_id}/usage': {
      get: {
        ...owner,
        operationId: 'getServiceUsage',
        parameters: [id],
        summary:
          'What the service used: listeners, listener-hours, bytes, transfer used vs included, source, time remaining, storage, recent life-cycle events.',
        description:
          'Measured from Icecast about once a second; byte counters lag up to ~5 s. With transfer bought, the service is suspended when listeners use more than it.',
        responses: { 200: ok('Usage', 'Usage'), ...common },
      },
    },
    '/services/{service_id}/files': {
      get: {
        ...owner,
        operationId: 'listServiceFiles',
        summary: 'Uploaded AutoDJ files, the playlist and shuffle.',
        parameters: [id],
        responses: { 200: ok('Files', 'Files'), ...common },
      },
    },
    '/services/{service_id}/files/{name}': {
      put: {
        ...owner,
        operationId: 'uploadServiceFile',
        parameters: [id, name],
        summary:
          'Upload an audio file for AutoDJ (temporary-autodj, or event-stream ordered with autodj: true). The body is the file itself.',
        description:
          'Send Content-Length: the size is reserved against storage_mb (stored files and uploads in progress count in full) before the body is read; an upload that does not fit is refused with 413 and nothing is kept. Accepted: MP3, AAC (ADTS), M4A, Ogg (Vorbis, Opus), FLAC, WAV, and only if the file decodes to its end; playlists of any kind are refused with 415. At most 2 uploads at once per service (429). There is no total time limit; an upload with no byte for 30 s is stopped (408, retryable). Uploading the same name replaces the file.',
        requestBody: {
          required: true,
          content: {
            'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
            'audio/*': { schema: { type: 'string', format: 'binary' } },
          },
        },
        responses: {
          201: ok('The stored file', 'StoredFile'),
          ...common,
          400: error('upload_incomplete or upload_too_long: the body did not match Content-Length.'),
          408: error('upload_stalled: no byte arrived for the idle timeout (retryable).'),
          409: noStorage,
          411: error('length_required: no Content-Length.'),
          413: error('storage_quota_exceeded: does not fit in the storage bought.'),
          415: error('playlist_not_accepted: a playlist, not audio.'),
          422: error('not_audio, empty_file or invalid_file_name.'),
          429: error('too_many_uploads to this service at once (retryable, Retry-After), rate_limited.'),
          503: error('audio_check_busy: too many uploads being checked on the server (retryable, Retry-After).'),
        },
      },
      delete: {
        ...owner,
        operationId: 'deleteServiceFile',
        summary: 'Delete an uploaded file.',
        parameters: [id, name],
        responses: {
          200: ok('Deleted', 'DeletedFile'),
          ...common,
          404: error('file_not_found or service_not_found.'),
          409: noStorage,
        },
      },
    },
    '/services/{service_id}/playlist': {
      put: {
        ...owner,
        operationId: 'setServicePlaylist',
        parameters: [id],
        summary: 'Set the AutoDJ play order (uploaded file names) and shuffle; takes effect at the next track.',
        requestBody: { required: true, content: { 'application/json': { schema: ref('Playlist') } } },
        responses: {
          200: ok('The playlist', 'PlaylistResponse'),
          ...common,
          409: noStorage,
          422: error('unknown_files: a name is not an uploaded file (error.details points at it), or invalid_request.'),
        },
      },
    },
  };
}
