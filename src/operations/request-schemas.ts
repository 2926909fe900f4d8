/** What each operation takes: the REST request bodies (and the MCP tools' arguments built on them), validated with these. */

export const productIdPattern = '^[a-z0-9][a-z0-9-]{1,80}$';

/** 1..255 printable ASCII characters, spaces allowed inside (HTTP drops them at either end). */
export const idempotencyKeyPattern = '^[\\x21-\\x7E](?:[\\x20-\\x7E]{0,253}[\\x21-\\x7E])?$';

const productIdProperty = (description: string) => ({ type: 'string', maxLength: 200, description });

export const quoteRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['product_id'],
  properties: {
    product_id: productIdProperty('Id of a quotable product, e.g. "instant-stream". GET /products lists them.'),
    parameters: {
      type: 'object',
      description:
        'Technical parameters of the product as described in its parameters map (GET /products/{product_id}). Numbers must be JSON numbers, not strings.',
    },
    billing: {
      enum: ['monthly', 'annual', 'one_time', 'quote'],
      description:
        "For a subscription (e.g. radio-directo): monthly or annual, priced in USDC at the catalog's exchange rate. Leave it out for products priced per order.",
    },
  },
};

export const orderRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['product_id', 'email', 'station_name'],
  properties: {
    product_id: { type: 'string', maxLength: 200 },
    billing: { enum: ['monthly', 'annual', 'one_time', 'quote'], default: 'one_time' },
    quantity: { type: 'integer', minimum: 1, maximum: 1, default: 1 },
    contact_name: { type: 'string', maxLength: 120 },
    email: { type: 'string', format: 'email', maxLength: 254 },
    station_name: { type: 'string', maxLength: 120 },
    parameters: { type: 'object' },
    metadata: { type: 'object', additionalProperties: { type: 'string', maxLength: 200 } },
  },
};

export const playlistSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['playlist'],
  properties: {
    playlist: {
      type: 'array',
      maxItems: 1000,
      items: { type: 'string', minLength: 1, maxLength: 128 },
      description: 'Uploaded file names in play order.',
    },
    shuffle: { type: 'boolean', description: 'Play the playlist in a new random order each round.' },
  },
};

export const extendRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['duration_hours'],
  properties: {
    duration_hours: {
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 8760,
      description:
        "Hours of paid time to add, at least the product's minimum duration_hours (422 extension_too_short below it). An active service's new expiry is its current expiry plus these hours; an expired one that comes back runs these hours from the moment the extension is paid. The service's hours over its whole life may not pass its product's maximum duration_hours.",
    },
  },
};

export const retentionRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['retention_days'],
  properties: {
    retention_days: {
      type: 'integer',
      minimum: 1,
      description:
        "Days to keep the recordings past the later of the service's end and now (the audio-storage-api product's retention_days bounds: 1 to 365 in the shipped catalog). Buying again adds days.",
    },
    recording_ids: {
      type: 'array',
      minItems: 1,
      maxItems: 500,
      uniqueItems: true,
      items: { type: 'string', pattern: '^rec_[A-Za-z0-9_-]{8,40}$' },
      description:
        'Which finished recordings to keep (recording_id of GET /services/{service_id}/recordings); all the finished ones when left out.',
    },
  },
};

export const upgradeRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['product_id'],
  properties: {
    product_id: productIdProperty('The product the service becomes, e.g. "event-stream" for an instant-stream.'),
  },
};
