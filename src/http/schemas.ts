import { productRequiredFields, productStateSchemas } from '../catalog/index.js';
import { productIdPattern } from '../operations/request-schemas.js';

/**
 * Response schemas, and the request schemas of the routes that are no operation: /openapi.json publishes all of them
 * with the operations' request schemas (src/operations/request-schemas.ts).
 */

export {
  extendRequestSchema,
  idempotencyKeyPattern,
  orderRequestSchema,
  playlistSchema,
  quoteRequestSchema,
  upgradeRequestSchema,
} from '../operations/request-schemas.js';
export { productIdPattern };

export const errorSchema = {
  type: 'object',
  required: ['ok', 'error'],
  properties: {
    ok: { const: false },
    error: {
      type: 'object',
      required: ['code', 'message', 'retryable', 'request_id'],
      properties: {
        code: {
          type: 'string',
          description:
            'Stable machine-readable reason, e.g. invalid_parameters, product_not_found, idempotency_key_reused.',
        },
        message: { type: 'string', description: 'What went wrong and what to do next.' },
        retryable: {
          type: 'boolean',
          description: 'True when the same request may succeed if repeated later (reuse the same Idempotency-Key).',
        },
        request_id: { type: 'string' },
        details: {
          type: 'array',
          items: {
            type: 'object',
            properties: { pointer: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' } },
          },
          description: 'One entry per problem, with a JSON pointer into the request body.',
        },
      },
    },
  },
};

export const productSchema = {
  type: 'object',
  required: productRequiredFields,
  properties: {
    id: { type: 'string', pattern: productIdPattern },
    name: { type: 'string' },
    type: { type: 'string' },
    ...productStateSchemas,
    description: { type: 'string' },
    pricing: {
      type: 'object',
      required: ['basis', 'currency'],
      properties: { basis: { type: 'string' }, currency: { type: 'string' } },
      description: 'Price; USDC amounts are integer strings of atomic units (6 decimals).',
    },
    parameters: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        required: ['type', 'required'],
        properties: {
          type: { type: 'string' },
          required: { type: 'boolean' },
          default: {},
          minimum: { type: 'number' },
          maximum: { type: 'number' },
        },
      },
    },
    limits: { type: 'object' },
    fulfillment: { type: 'object' },
    payment: { type: 'object' },
  },
};

export const quoteResponseSchema = {
  type: 'object',
  required: ['ok', 'quote'],
  properties: {
    ok: { const: true },
    quote: {
      type: 'object',
      required: ['id', 'product', 'configuration', 'price', 'currency', 'breakdown', 'expires_at_quote'],
      properties: {
        id: {
          type: 'string',
          description:
            'Stable across retries with the same Idempotency-Key. Put it in metadata.quote_id of POST ' +
            '/orders to lock this price until expires_at_quote.',
        },
        product: {
          type: 'object',
          required: ['id', 'name', 'type', 'billing_type'],
          properties: {
            id: { type: 'string' },
            name: { type: 'string' },
            type: { type: 'string' },
            billing_type: { type: 'string' },
            pricing_model: { type: 'string' },
          },
        },
        configuration: {
          type: 'object',
          additionalProperties: true,
          description:
            'The parameters as they will be provisioned, defaults filled in (the Parameters_* schema of the product).',
        },
        billing: { enum: ['monthly', 'annual'], description: 'For a subscription: the billing quoted.' },
        price: {
          type: 'object',
          required: ['amount', 'amount_atomic', 'currency', 'decimals'],
          properties: {
            amount: { type: 'string', pattern: '^[0-9]+(?:\\.[0-9]+)?$' },
            amount_atomic: { type: 'string', pattern: '^[0-9]+$' },
            currency: { const: 'USDC' },
            decimals: { const: 6 },
          },
        },
        currency: { const: 'USDC' },
        breakdown: {
          type: 'array',
          items: {
            type: 'object',
            required: ['code', 'quantity', 'unit', 'rate', 'amount_atomic'],
            description: 'One price component (each line rounded up to a whole atomic unit).',
            properties: {
              code: { type: 'string' },
              quantity: { type: 'string' },
              unit: { type: 'string' },
              rate: { type: 'string' },
              rate_atomic: { type: 'string' },
              amount_atomic: { type: 'string', pattern: '^[0-9]+$' },
              amount: { type: 'string' },
              exchange_rate: {
                type: 'object',
                description: 'For a price in another currency: the rate applied and where it comes from.',
                properties: {
                  pair: { type: 'string' },
                  rate: { type: 'string' },
                  source: { type: 'string' },
                  catalog_hash: { type: 'string' },
                },
              },
            },
          },
        },
        formula: { type: 'string' },
        transfer_policy: { type: 'string' },
        created_at: { type: 'string', format: 'date-time' },
        expires_at_quote: { type: 'string', format: 'date-time' },
        pricing_status: { enum: ['approved', 'pending'] },
        agent_orderable: { type: 'boolean' },
        agent_orderable_reasons: {
          type: 'array',
          description: 'Why an agent cannot order this configuration (agent_orderable false).',
          items: {
            type: 'object',
            required: ['code', 'reason'],
            properties: { code: { type: 'string' }, reason: { type: 'string' } },
          },
        },
        audit: { type: 'object', properties: { evaluation_id: { type: 'string' }, catalog_hash: { type: 'string' } } },
      },
    },
    idempotency: { type: 'object', properties: { key: { type: 'string' }, replayed: { type: 'boolean' } } },
  },
};

export const nowPlayingSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['title'],
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 300, description: 'What plays now: a song or show title.' },
    artist: { type: ['string', 'null'], maxLength: 300, description: 'Who performs it; null or absent when none.' },
  },
};
