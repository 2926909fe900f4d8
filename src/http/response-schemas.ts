/** Schemas of what the service answers: published in /openapi.json and in the bazaar declarations of paid operations. */

const amountSchema = {
  type: 'object',
  required: ['amount', 'amount_atomic', 'currency', 'decimals'],
  properties: {
    amount: { type: 'string', pattern: '^[0-9]+(?:\\.[0-9]+)?$', description: 'Decimal string, e.g. "2.37".' },
    amount_atomic: { type: 'string', pattern: '^[0-9]+$', description: 'Integer string of atomic units (6 decimals).' },
    currency: { const: 'USDC' },
    decimals: { const: 6 },
  },
};

export const orderSchema = {
  type: 'object',
  required: ['id', 'status', 'product_id', 'billing', 'configuration', 'amount', 'payment', 'created_at'],
  properties: {
    id: { type: 'string', pattern: '^ra_' },
    status: { enum: ['settling', 'provisioning', 'active', 'failed'] },
    product_id: { type: 'string' },
    billing: { type: 'string' },
    configuration: { type: 'object', description: 'The parameters as provisioned, defaults filled in.' },
    amount: amountSchema,
    quote_id: { type: ['string', 'null'] },
    evaluation_id: { type: ['string', 'null'], description: 'The audit record that priced this order (agent-audio audit show ID).' },
    upgrade_of: { type: 'string', description: 'For an upgrade: the service it changed.' },
    payment: {
      type: 'object',
      required: ['protocol', 'network', 'payer'],
      properties: {
        protocol: { const: 'x402' },
        network: { type: 'string' },
        payer: { type: 'string' },
        transaction: { type: ['string', 'null'] },
        block_number: { type: ['string', 'null'] },
      },
    },
    failure: { type: ['string', 'null'] },
    created_at: { type: 'string', format: 'date-time' },
    settled_at: { type: ['string', 'null'], format: 'date-time' },
  },
};

export const serviceSchema = {
  type: 'object',
  required: ['service_id', 'status', 'stream_url', 'limits'],
  properties: {
    service_id: { type: 'string' },
    status: { enum: ['pending', 'provisioning', 'active', 'failed', 'suspended', 'expired'] },
    stream_url: { type: 'string', format: 'uri', description: 'Where listeners connect.' },
    broadcast_url: { type: 'string', description: 'icecast://user:password@host:port/mount: where your encoder sends the stream.' },
    expires_at: { type: 'string', format: 'date-time' },
    limits: { type: 'object', description: 'What was bought: duration, listeners, bitrate, transfer, storage.' },
    endpoints: { type: 'object', additionalProperties: { type: 'string' }, description: 'listen, source_host, source_port, source_mount, encoder_example, service.' },
  },
};

/** POST /orders and POST /services/{id}/upgrade, paid. */
export const orderResponseSchema = {
  type: 'object',
  required: ['ok', 'order', 'service', 'idempotent_replay'],
  properties: {
    ok: { const: true },
    order: orderSchema,
    service: serviceSchema,
    idempotent_replay: { type: 'boolean', description: 'True when this is the order an earlier identical request already paid for.' },
  },
};
