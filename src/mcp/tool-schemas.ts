import { parametersSchema } from '../catalog/index.js';
import {
  extendRequestSchema,
  idempotencyKeyPattern,
  orderRequestSchema,
  playlistSchema,
  productIdPattern,
  quoteRequestSchema,
  retentionRequestSchema,
  upgradeRequestSchema,
} from '../operations/request-schemas.js';
import { RETENTION_PRODUCT } from '../orders/index.js';
import { SnapshotCache, type Snapshot } from '../pricing/index.js';

type Schema = Record<string, unknown>;

/**
 * Tool arguments are the REST request bodies plus what REST carries in the path or headers (service_id,
 * idempotency_key). These are the schemas the arguments are checked with; the ones published in tools/list add the
 * live catalog (product ids and each product's parameters schema), as /openapi.json does.
 */
const idempotencyKey = (required: boolean) => ({
  type: 'string',
  minLength: 1,
  maxLength: 255,
  pattern: idempotencyKeyPattern,
  description: required
    ? 'A new unique value (e.g. a UUID) per purchase, as the Idempotency-Key header of the REST API. Send the ' +
      'same key when you retry the same call (also with the payment): you get the same order and are never ' +
      'charged twice.'
    : 'Optional, as the Idempotency-Key header of POST /quotes: the same arguments with the same key give the ' +
      'same quote.',
});
const serviceId = {
  type: 'string',
  minLength: 8,
  maxLength: 120,
  pattern: '^[a-zA-Z0-9_-]{8,120}$',
  description: 'service.service_id from your order.',
};

const withFields = (schema: Schema, fields: Record<string, unknown>, required: string[]): Schema => ({
  ...schema,
  required: [...((schema.required as string[] | undefined) ?? []), ...required],
  properties: { ...(schema.properties as Schema), ...fields },
});

export const argumentSchemas = {
  list_products: { type: 'object', additionalProperties: false, properties: {} },
  describe_product: {
    type: 'object',
    additionalProperties: false,
    required: ['product_id'],
    properties: { product_id: { type: 'string', maxLength: 200 } },
  },
  quote: withFields(quoteRequestSchema, { idempotency_key: idempotencyKey(false) }, []),
  order: withFields(orderRequestSchema, { idempotency_key: idempotencyKey(true) }, ['idempotency_key']),
  service_status: {
    type: 'object',
    additionalProperties: false,
    required: ['service_id'],
    properties: { service_id: serviceId },
  },
  service_usage: {
    type: 'object',
    additionalProperties: false,
    required: ['service_id'],
    properties: { service_id: serviceId },
  },
  stop_service: {
    type: 'object',
    additionalProperties: false,
    required: ['service_id'],
    properties: { service_id: serviceId },
  },
  upgrade_service: withFields(upgradeRequestSchema, { service_id: serviceId, idempotency_key: idempotencyKey(true) }, [
    'service_id',
    'idempotency_key',
  ]),
  extend_service: withFields(extendRequestSchema, { service_id: serviceId, idempotency_key: idempotencyKey(true) }, [
    'service_id',
    'idempotency_key',
  ]),
  retain_recordings: withFields(
    retentionRequestSchema,
    { service_id: serviceId, idempotency_key: idempotencyKey(true) },
    ['service_id', 'idempotency_key'],
  ),
  set_playlist: withFields(playlistSchema, { service_id: serviceId }, ['service_id']),
  service_events: {
    type: 'object',
    additionalProperties: false,
    required: ['service_id'],
    properties: {
      service_id: serviceId,
      last_event_id: {
        type: 'string',
        pattern: '^evt_[A-Za-z0-9_-]{4,80}$',
        description:
          'The id of the last event you have: only later ones are returned. Leave it out for every event ' +
          'from the first.',
      },
      wait_seconds: {
        type: 'integer',
        minimum: 0,
        maximum: 25,
        default: 20,
        description: 'When there is no later event yet, wait this long for one before answering with none.',
      },
    },
  },
  create_api_key: {
    type: 'object',
    additionalProperties: false,
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 100, description: 'A name to tell your keys apart.' },
      expires_in_hours: {
        type: 'integer',
        minimum: 1,
        maximum: 720,
        default: 24,
        description: 'How long the key is accepted, in hours (at most 30 days); it can be revoked before.',
      },
    },
  },
  revoke_api_key: { type: 'object', additionalProperties: false, properties: {} },
} satisfies Record<string, Schema>;

export type ToolName = keyof typeof argumentSchemas;

const cache = new SnapshotCache<Record<ToolName, Schema>>();

/** The input schemas of tools/list for this catalog snapshot (built once per snapshot). */
export function publishedSchemas(snapshot: Snapshot): Record<ToolName, Schema> {
  return cache.get(snapshot, () => build(snapshot));
}

function build(snapshot: Snapshot): Record<ToolName, Schema> {
  const entries = snapshot.catalog.products;
  const quotable = entries.filter((p) => !snapshot.verdicts.get(p.product.id)?.rejection);
  // Retention is bought per service (retain_recordings), not with the order tool.
  const orderable = entries.filter(
    (p) => snapshot.verdicts.get(p.product.id)?.notOrderable.length === 0 && p.product.id !== RETENTION_PRODUCT,
  );
  const all = entries.map((p) => p.product.id);
  return {
    ...argumentSchemas,
    describe_product: withProducts(argumentSchemas.describe_product, all),
    quote: withParameters(
      withProducts(
        argumentSchemas.quote,
        quotable.map((p) => p.product.id),
      ),
      quotable,
    ),
    order: withParameters(
      withProducts(
        argumentSchemas.order,
        orderable.map((p) => p.product.id),
      ),
      orderable,
    ),
    upgrade_service: withProducts(
      argumentSchemas.upgrade_service,
      orderable.map((p) => p.product.id),
    ),
  };
}

/** product_id narrowed to the products the tool takes now. */
function withProducts(schema: Schema, ids: string[]): Schema {
  const properties = schema.properties as Schema;
  const productId = {
    ...(properties.product_id as Schema),
    pattern: productIdPattern,
    ...(ids.length && { enum: ids }),
  };
  return { ...schema, properties: { ...properties, product_id: productId } };
}

/**
 * One branch per product: its product_id and the JSON Schema its parameters are validated with (as Parameters_* in
 * /openapi.json).
 */
function withParameters(schema: Schema, products: Snapshot['catalog']['products']): Schema {
  if (!products.length) return schema;
  return {
    ...schema,
    oneOf: products.map((p) => {
      const parameters: Record<string, unknown> = {
        ...parametersSchema(p.acceptedParameters),
        description: `parameters for product_id "${p.product.id}"`,
      };
      const required = (parameters.required as string[]).length ? ['product_id', 'parameters'] : ['product_id'];
      return { required, properties: { product_id: { const: p.product.id }, parameters } };
    }),
  };
}
