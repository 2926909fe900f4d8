import { productIdPattern } from '../schemas.js';
import { error, idempotencyHeader, ok, rateLimited, ref, storeUnavailable, unauthorized } from './common.js';

const open = { security: [] as unknown[], tags: ['Discovery'] };

/** The Discovery tag's paths: health, the catalog, prices, availability, quotes and the public documents. */
export const discoveryPaths = {
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
      summary: 'x402 discovery manifest (draft): the paid operations, their networks, asset, receiver and price range.',
      description:
        'Served at the site root. Follows the draft of x402-foundation/x402 specs/extensions/well-known-discovery.md (also at /.well-known/x402.json). Advisory: the live 402 is authoritative for the amount.',
      responses: { 200: ok('The manifest', 'WellKnownX402'), 429: rateLimited },
    },
  },
};
