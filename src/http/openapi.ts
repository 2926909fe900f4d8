import { parametersSchema } from '../catalog/index.js';
import type { Snapshot } from '../pricing/index.js';
import { errorSchema, idempotencyKeyPattern, orderRequestSchema, playlistSchema, upgradeRequestSchema, productIdPattern, productSchema, quoteRequestSchema, quoteResponseSchema } from './schemas.js';

const cache = new WeakMap<Snapshot, Buffer>();

const error = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
const ok = (description: string, schema: unknown) => ({ description, content: { 'application/json': { schema } } });
const idempotencyHeader = (required: boolean) => ({
  name: 'Idempotency-Key', in: 'header', required,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: idempotencyKeyPattern },
  description: required
    ? 'Required. A new unique value (e.g. a UUID) per purchase. Reuse the same Idempotency-Key when you retry the same purchase: you get the same order back and are never charged twice.'
    : 'Optional. Reuse the same key when you retry: the same body returns the same quote; a different body with the same key is refused with 409.',
});

/** OpenAPI 3.1, generated from the schemas the server validates with and the catalog being served. */
export function openApiDocument(snapshot: Snapshot, version: string): Buffer {
  let doc = cache.get(snapshot);
  if (!doc) {
    doc = Buffer.from(JSON.stringify(build(snapshot, version)));
    cache.set(snapshot, doc);
  }
  return doc;
}

function build(snapshot: Snapshot, version: string) {
  const { order_limits: limits } = snapshot.catalog.settings;
  const quotable = snapshot.catalog.products.filter((p) => !snapshot.verdicts.get(p.product.id)!.rejection && p.product.billing_type !== 'subscription');
  const parameterSchemas = Object.fromEntries(quotable.map((p) => [`Parameters_${p.product.id.replace(/-/g, '_')}`, {
    ...parametersSchema(p.acceptedParameters),
    description: `parameters for product_id "${p.product.id}"`,
  }]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Agent Audio Infrastructure API',
      version: '1.0.0',
      'x-service-version': version,
      description: 'Buy live audio streams and temporary AutoDJ as a software agent and pay with x402 v2 (USDC on Base). '
        + 'Typical flow: GET /products → POST /quotes (exact USDC price) → POST /orders (answers 402 with PAYMENT-REQUIRED; pay and send the same request again with PAYMENT-SIGNATURE and the same Idempotency-Key). '
        + 'Every error is {ok:false, error:{code, message, retryable, request_id}}; the message says what to do next.',
    },
    servers: [{ url: '/api/v1' }],
    tags: [
      { name: 'Discovery', description: 'Catalog, prices, availability and quotes.' },
      { name: 'Orders', description: 'Orders secured by a bearer key and confirmed by x402 v2 payment.' },
      { name: 'Services', description: 'State, usage and life cycle of a provisioned service.' },
    ],
    components: {
      securitySchemes: { agentApiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'agent-api-key', description: 'Send "Authorization: Bearer <AGENT_API_KEY>".' } },
      schemas: {
        Error: errorSchema,
        Product: productSchema,
        QuoteRequest: { ...quoteRequestSchema, description: `product_id is one of: ${quotable.map((p) => p.product.id).join(', ')}; parameters follow the matching Parameters_* schema.` },
        QuoteResponse: quoteResponseSchema,
        OrderRequest: orderRequestSchema,
        Playlist: playlistSchema,
        UpgradeRequest: upgradeRequestSchema,
        ...parameterSchemas,
      },
    },
    paths: {
      '/health': { get: { tags: ['Discovery'], operationId: 'getHealth', summary: 'Service health, version, catalog hash and dependency checks.', responses: { 200: ok('Health', { type: 'object' }) } } },
      '/products': { get: { tags: ['Discovery'], operationId: 'listProducts', summary: 'Every product with its parameters, limits and payment methods.', responses: { 200: ok('ProductList', { type: 'object', properties: { ok: { const: true }, catalog_version: { type: 'integer' }, count: { type: 'integer' }, products: { type: 'array', items: { $ref: '#/components/schemas/Product' } } } }) } } },
      '/products/{product_id}': {
        get: {
          tags: ['Discovery'], operationId: 'getProduct', summary: 'One product.',
          parameters: [{ name: 'product_id', in: 'path', required: true, schema: { type: 'string', pattern: productIdPattern } }],
          responses: { 200: ok('Product', { type: 'object', properties: { ok: { const: true }, product: { $ref: '#/components/schemas/Product' } } }), 404: error('No such product: list them with GET /products.') },
        },
      },
      '/pricing': { get: { tags: ['Discovery'], operationId: 'getPricing', summary: 'Current prices and products in preparation.', responses: { 200: ok('Pricing', { type: 'object' }) } } },
      '/availability': { get: { tags: ['Discovery'], operationId: 'getAvailability', summary: 'Which products an agent can order now, and whether machine checkout is configured.', responses: { 200: ok('Availability', { type: 'object' }) } } },
      '/quotes': {
        post: {
          tags: ['Discovery'], operationId: 'createQuote',
          summary: 'Exact USDC price of a configuration, with breakdown and expiry. Creates no order.',
          description: 'Amounts are decimal strings (amount) and integer strings of atomic units (amount_atomic, 6 decimals). Each price line is rounded up to a whole atomic unit.',
          security: [{ agentApiKey: [] }],
          parameters: [idempotencyHeader(false)],
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/QuoteRequest' } } } },
          responses: {
            200: ok('The quote', { $ref: '#/components/schemas/QuoteResponse' }),
            401: error('Missing or invalid API key.'),
            404: error('Unknown product.'),
            409: error('The product cannot be quoted now (planned, pricing pending) or the Idempotency-Key was used for another body.'),
            413: error('Body too large.'),
            415: error('Body is not JSON.'),
            422: error('Invalid parameters (error.details lists each with a JSON pointer) or a malformed Idempotency-Key.'),
          },
        },
      },
      '/orders': {
        post: {
          tags: ['Orders'], operationId: 'createOrder',
          summary: 'Order a product and pay with x402 v2.',
          // Spec 5.4: no security requirement of its own; the bearer key is described, and 401 stands for it.
          description: 'Protected by your agent API key (send "Authorization: Bearer <AGENT_API_KEY>", as for POST /quotes) and confirmed by x402 v2 payment. First call without PAYMENT-SIGNATURE: the answer is 402 with a PAYMENT-REQUIRED header (Base64 JSON, x402 v2). Sign the payment with your wallet and send the same request again, with the same Idempotency-Key, adding the PAYMENT-SIGNATURE header. Nothing is provisioned before the payment is verified and settled. While machine payment is not configured on a deployment this answers 503.',
          'x-payment-info': { protocol: 'x402', x402Version: 2, pricing_mode: 'dynamic', currency: limits.currency, minimum: limits.minimum, maximum: limits.maximum, network: 'eip155:8453', asset: 'USDC' },
          parameters: [
            idempotencyHeader(true),
            { name: 'PAYMENT-SIGNATURE', in: 'header', required: false, schema: { type: 'string' }, description: 'x402 v2 payment payload, Base64-encoded JSON, built from the PAYMENT-REQUIRED of the 402 answer.' },
          ],
          requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/OrderRequest' } } } },
          responses: {
            200: { description: 'Paid and provisioned. PAYMENT-RESPONSE holds the x402 settlement.', headers: { 'PAYMENT-RESPONSE': { schema: { type: 'string' } } }, content: { 'application/json': { schema: { type: 'object' } } } },
            400: error('Idempotency-Key missing or malformed.'),
            401: error('Missing or invalid API key.'),
            402: { description: 'Payment required: pay as described in PAYMENT-REQUIRED and repeat the request.', headers: { 'PAYMENT-REQUIRED': { schema: { type: 'string' } } }, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
            404: error('Unknown product: list them with GET /products.'),
            409: error('Conflict of state or idempotency.'),
            413: error('Body too large.'),
            415: error('Body is not JSON.'),
            422: error('Invalid order request: error.details lists each problem with a JSON pointer.'),
            429: error('Too many requests (rate_limited), or this API key (per_key_limit_reached) or paying address (per_payer_limit_reached) already holds as many live services or listener places as one buyer may: nothing was charged; error.details says the limits and what is in use, Retry-After when the next of your services expires.'),
            503: error('Machine payment not configured on this deployment, no free stream slot or listener places (capacity_exhausted: retry later or ask for fewer listeners), or a dependency briefly unavailable (retryable).'),
          },
        },
      },
      '/orders/{order_id}': {
        get: {
          tags: ['Orders'], operationId: 'getOrder', summary: 'An order of yours, with its service.', security: [{ agentApiKey: [] }],
          parameters: [{ name: 'order_id', in: 'path', required: true, schema: { type: 'string', pattern: '^ra_[a-zA-Z0-9_-]{8,120}$' } }],
          responses: { 200: ok('The order and its service', { type: 'object' }), 401: error('Missing or invalid API key.'), 404: error('No such order for this API key.') },
        },
      },
      '/audit/head': {
        get: {
          tags: ['Discovery'], operationId: 'getAuditHead', summary: 'The latest audit chain head, signed with the operator key (Ed25519), and the public key. Public.',
          description: 'Keep it: `agent-audio audit verify --head FILE` or an exported bundle later proves that the log up to this seq was not rewritten.',
          responses: { 200: ok('signed_head, key_id, public_key', { type: 'object' }), 503: error('No operator signing key is configured on this deployment.') },
        },
      },
      ...servicePaths(limits.currency),
    },
  };
}

function servicePaths(snapshotCurrency: string) {
  const id = { name: 'service_id', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' }, description: 'service.service_id from your order.' };
  const name = { name: 'name', in: 'path', required: true, schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._ ()-]{0,127}$' } };
  const owner = { security: [{ agentApiKey: [] }], tags: ['Services'] };
  const notFound = error('No such service for this API key (another key\'s service looks the same as none).');
  return {
    '/services/{service_id}': {
      get: { ...owner, operationId: 'getService', summary: 'The service record: status, stream and broadcast URLs, limits, expiry; status_reason when something was enforced.', parameters: [id], responses: { 200: ok('ServiceResponse', { type: 'object' }), 404: notFound } },
    },
    '/services/{service_id}/upgrade': {
      post: {
        ...owner, operationId: 'upgradeService', parameters: [id, { name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', minLength: 1, maxLength: 255 }, description: 'A new value per upgrade; reuse it when you retry the same upgrade.' }, { name: 'PAYMENT-SIGNATURE', in: 'header', required: false, schema: { type: 'string' } }],
        summary: 'Turn the service into another product for the rest of its paid time (e.g. instant-stream → event-stream), paid with x402 exactly like an order.',
        description: 'First call: 402 with PAYMENT-REQUIRED. The price is the target product for the remaining time (its transfer renewed) minus the unused current time, at least the order minimum. Applied without disconnecting the source or listeners; a suspended service becomes active again.',
        'x-payment-info': { protocol: 'x402', x402Version: 2, pricing_mode: 'dynamic', currency: snapshotCurrency, network: 'eip155:8453' },
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/UpgradeRequest' } } } },
        responses: { 200: ok('The order and the upgraded service; PAYMENT-RESPONSE holds the settlement.', { type: 'object' }), 402: error('Payment required: pay as described in PAYMENT-REQUIRED and repeat.'), 404: notFound, 409: error('This upgrade is not possible or would change nothing (see message), another upgrade of the service is being paid (upgrade_in_progress), or the Idempotency-Key was used for another request. Nothing is charged.') },
      },
    },
    '/services/{service_id}/usage': {
      get: {
        ...owner, operationId: 'getServiceUsage', parameters: [id],
        summary: 'What the service used: listeners (current, peak), listener-hours, bytes to listeners and from the source, transfer used vs included, source connected since, time remaining, storage used vs bought, recent life-cycle events.',
        description: 'Measured from Icecast about once a second; byte counters lag up to ~5 s. With transfer bought, the service is suspended when listeners use more than it.',
        responses: { 200: ok('UsageResponse', { type: 'object' }), 404: notFound },
      },
    },
    '/services/{service_id}/files': {
      get: { ...owner, operationId: 'listServiceFiles', summary: 'Uploaded AutoDJ files, the playlist and shuffle.', parameters: [id], responses: { 200: ok('Files', { type: 'object' }), 404: notFound } },
    },
    '/services/{service_id}/files/{name}': {
      put: {
        ...owner, operationId: 'uploadServiceFile', parameters: [id, name],
        summary: 'Upload an audio file for AutoDJ (temporary-autodj, or event-stream ordered with autodj: true). The body is the file itself.',
        description: 'Send Content-Length: the size is reserved against storage_mb (stored files and uploads in progress count in full) before the body is read; an upload that does not fit is refused with 413 and nothing is kept. Accepted: MP3, AAC (ADTS), M4A, Ogg (Vorbis, Opus), FLAC, WAV, and only if the file decodes to its end; playlists of any kind are refused with 415. At most 2 uploads at once per service (429). There is no total time limit; an upload with no byte for 30 s is stopped (408, retryable). Uploading the same name replaces the file.',
        requestBody: { required: true, content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } }, 'audio/*': { schema: { type: 'string', format: 'binary' } } } },
        responses: {
          201: ok('The stored file', { type: 'object' }), 404: notFound, 408: error('No byte arrived for the idle timeout (retryable).'), 409: error('The service has no storage or is not active.'),
          411: error('No Content-Length.'), 413: error('Does not fit in the storage bought.'), 415: error('A playlist, not audio.'), 422: error('Not audio, empty, or a bad file name.'),
          429: error('Too many uploads to this service at once (retryable, Retry-After).'), 503: error('Too many uploads being checked on the server (retryable, Retry-After).'),
        },
      },
      delete: { ...owner, operationId: 'deleteServiceFile', summary: 'Delete an uploaded file.', parameters: [id, name], responses: { 200: ok('Deleted', { type: 'object' }), 404: error('No such file or service.') } },
    },
    '/services/{service_id}/playlist': {
      put: {
        ...owner, operationId: 'setServicePlaylist', parameters: [id], summary: 'Set the AutoDJ play order (uploaded file names) and shuffle; takes effect at the next track.',
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Playlist' } } } },
        responses: { 200: ok('The playlist', { type: 'object' }), 404: notFound, 422: error('A name is not an uploaded file: error.details points at it.') },
      },
    },
  };
}
