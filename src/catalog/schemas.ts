const decimalString = { type: 'string', pattern: '^[0-9]+(\\.[0-9]+)?$' };
const atomicString = { type: 'string', pattern: '^[0-9]+$' };
const identifier = { type: 'string', pattern: '^[a-z0-9][a-z0-9-]{1,80}$' };
const bound = { type: 'number' };
/** What one buyer may hold at once: live services and the listener places they were sold. */
const buyerLimit = {
  type: 'object',
  additionalProperties: false,
  properties: { live_services: { type: 'integer', minimum: 0 }, listener_places: { type: 'integer', minimum: 0 } },
};

/** The share of a host that buyers without paid history may fill; the rest waits for established payers. */
const capacityReserve = {
  type: 'object',
  additionalProperties: false,
  required: ['newcomer_share', 'established_payer'],
  properties: {
    newcomer_share: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      description: "Share of the host's stream slots and listener places that an order from a newcomer may fill.",
    },
    established_payer: {
      type: 'object',
      additionalProperties: false,
      required: ['minimum_paid', 'paid_hours_ago'],
      properties: {
        minimum_paid: { ...decimalString, description: 'USD a wallet must have paid (settled, less refunds).' },
        paid_hours_ago: { type: 'number', minimum: 0, maximum: 8760, description: 'How old those payments must be.' },
      },
    },
  },
};

export const parameterDescriptorSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'required'],
  properties: {
    type: { enum: ['number', 'integer', 'boolean', 'string', 'url', 'duration', 'quantity'] },
    required: { type: 'boolean' },
    default: {},
    minimum: bound,
    maximum: bound,
    description: { type: 'string' },
  },
};

const parameterMap = {
  type: 'object',
  propertyNames: { pattern: '^[a-z][a-z0-9_]{0,63}$' },
  additionalProperties: parameterDescriptorSchema,
};
const booleanPair = {
  type: 'object',
  additionalProperties: false,
  required: ['human', 'agent'],
  properties: { human: { type: 'boolean' }, agent: { type: 'boolean' } },
};

/** The fields every product has, in its catalog file and in the API's product documents alike. */
export const productRequiredFields = [
  'id',
  'name',
  'type',
  'billing_type',
  'status',
  'pricing_status',
  'orderable',
  'pricing',
  'parameters',
  'limits',
  'payment',
];

/** The product fields whose values the catalog and the API documents share. */
export const productStateSchemas = {
  billing_type: { enum: ['subscription', 'quote', 'one_time'] },
  status: { enum: ['available', 'ready', 'pending', 'planned', 'disabled'] },
  pricing_status: { enum: ['approved', 'pending'] },
  visibility: booleanPair,
  orderable: booleanPair,
};

export const productFileSchema = {
  $id: 'product-file',
  type: 'object',
  additionalProperties: false,
  required: productRequiredFields,
  properties: {
    id: identifier,
    name: { type: 'string', minLength: 1 },
    type: {
      enum: [
        'radio_streaming_subscription',
        'instant_stream',
        'event_stream',
        'streaming_boost_relay',
        'temporary_autodj',
        'temporary_audio',
        'audio_storage_api',
      ],
    },
    ...productStateSchemas,
    description: { type: 'string' },
    pricing: {
      type: 'object',
      required: ['basis', 'currency', 'pricing_status'],
      properties: {
        basis: { enum: ['subscription', 'one_time', 'quote'] },
        currency: { enum: ['USDC', 'EUR'] },
        monthly: { type: 'number', minimum: 0 },
        annual: { type: 'number', minimum: 0 },
        amount: { type: 'number', minimum: 0 },
        decimals: { type: 'integer', minimum: 0, maximum: 18 },
        base_atomic: atomicString,
        per_hour_atomic: atomicString,
        per_gb_atomic: atomicString,
        per_recording_gb_atomic: atomicString,
        packages: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            required: ['id', 'max_duration_hours', 'max_storage_mb', 'amount_atomic'],
            properties: {
              id: { type: 'string', minLength: 1 },
              max_duration_hours: { type: 'number', exclusiveMinimum: 0 },
              max_storage_mb: { type: 'integer', minimum: 1 },
              amount_atomic: atomicString,
            },
          },
        },
        formula: { type: 'string' },
        transfer_unit: { const: 'GB' },
        transfer_policy: { type: 'string' },
        pricing_status: { enum: ['approved', 'pending'] },
        model: { enum: ['formula', 'granular', 'package_plus_transfer'] },
        quote_ttl_seconds: { type: 'integer', minimum: 1, maximum: 86400 },
        transfer_max_gb: { type: 'number', minimum: 0 },
      },
    },
    parameters: parameterMap,
    unlisted_parameters: parameterMap,
    limits: {
      type: 'object',
      properties: {
        autodj: { type: 'boolean', description: 'Every service of this product has an AutoDJ, whatever was ordered.' },
      },
    },
    fulfillment: {
      type: 'object',
      properties: {
        provider: { type: 'string' },
        provisioning: {
          enum: ['automatic_for_human_checkout', 'validated', 'prepared_with_relay_adapter_pending', 'not_validated'],
        },
        capabilities: {
          type: 'array',
          uniqueItems: true,
          items: { enum: ['live_source', 'autodj_option', 'autodj', 'storage', 'expiry'] },
        },
        source_stream_url_required: { type: 'boolean' },
        ssrf_protection: { enum: ['public_http_https_only'] },
      },
    },
    payment: {
      type: 'object',
      required: ['human', 'machine', 'machine_payment_available'],
      properties: {
        human: { type: 'array', uniqueItems: true, items: { enum: ['hosted_checkout'] } },
        machine: { type: 'array', uniqueItems: true, items: { enum: ['x402'] } },
        machine_payment_available: { type: 'boolean' },
      },
    },
  },
};

export const catalogFileSchema = {
  $id: 'catalog-file',
  type: 'object',
  additionalProperties: false,
  required: [
    'catalog_version',
    'service',
    'provider',
    'region',
    'human_checkout',
    'panel_provider',
    'order_limits',
    'exchange_rates',
    'products',
  ],
  properties: {
    catalog_version: { type: 'integer', minimum: 1 },
    service: { type: 'string', minLength: 1 },
    provider: { type: 'string', minLength: 1 },
    region: { type: 'string', minLength: 1 },
    human_checkout: { type: 'boolean' },
    panel_provider: { type: 'string', minLength: 1 },
    order_limits: {
      type: 'object',
      additionalProperties: false,
      required: ['currency', 'minimum', 'maximum'],
      properties: { currency: { const: 'USD' }, minimum: decimalString, maximum: decimalString },
    },
    exchange_rates: {
      type: 'object',
      propertyNames: { pattern: '^[A-Z]{3,5}_[A-Z]{3,5}$' },
      additionalProperties: decimalString,
    },
    products: { type: 'array', uniqueItems: true, minItems: 1, items: identifier },
    upgrades: {
      type: 'object',
      propertyNames: identifier,
      additionalProperties: { type: 'array', uniqueItems: true, items: identifier },
    },
    extensions: {
      type: 'object',
      additionalProperties: false,
      properties: {
        grace_hours: {
          type: 'number',
          minimum: 0,
          maximum: 8760,
          description: 'Hours after its expiry during which a service can still be extended (default 24).',
        },
      },
    },
    buyer_limits: {
      type: 'object',
      additionalProperties: false,
      properties: { per_key: buyerLimit, per_payer: buyerLimit },
    },
    refunds: {
      type: 'object',
      additionalProperties: false,
      required: ['minimum'],
      properties: { minimum: decimalString },
    },
    capacity_reserve: capacityReserve,
  },
};
