import { retentionRequestSchema } from '../../operations/request-schemas.js';
import { recordingSettingSchema } from '../recordings.js';
import { idempotencyHeader, paidResponse, paymentRequired, paymentSignatureHeader } from './common.js';
import type { OpenApiPart } from './part.js';

const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const json = (description: string, ref: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } },
});
const owner = { security: [{ agentApiKey: [] }, { siwx: [] }, {}], tags: ['Recordings'] };
const ownerOrPublic = { security: [{}, { agentApiKey: [] }, { siwx: [] }], tags: ['Recordings'] };
const serviceId = {
  name: 'service_id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' },
};
const recordingId = {
  name: 'recording_id',
  in: 'path',
  required: true,
  description: 'The recording id, with or without its extension (download_url has it: podcast apps look at it).',
  schema: { type: 'string', pattern: '^rec_[A-Za-z0-9_-]{8,40}(\\.(mp3|aac|ogg))?$' },
};
const notFound = error('service_not_found: no service with this id for your key or wallet.');
const unauthorized = error('unauthorized: send your API key (Authorization: Bearer) or sign in with the wallet.');
const signIn = {
  description:
    'authentication_required: no credentials were sent (or a private feed). PAYMENT-REQUIRED carries the wallet ' +
    'sign-in challenge (see GET /services/{service_id}).',
  headers: {
    'PAYMENT-REQUIRED': {
      description: 'x402 v2 PaymentRequired (sign-in only), Base64-encoded JSON.',
      schema: { type: 'string' },
    },
  },
  content: { 'application/json': { schema: { $ref: '#/components/schemas/PaymentRequired' } } },
};
const rateLimited = error('rate_limited or too_many_connections: wait Retry-After seconds.');
const unavailable = error('not_available (retryable): streaming is off on this deployment.');

const recordingSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['recording_id', 'status', 'started_at', 'ended_at', 'duration_seconds', 'size_bytes', 'content_type'],
  properties: {
    recording_id: { type: 'string' },
    status: {
      enum: ['recording', 'complete'],
      description:
        'recording: the show goes on (a source back within a minute continues it); complete: over, measured.',
    },
    started_at: { type: 'string', format: 'date-time' },
    ended_at: { type: ['string', 'null'], format: 'date-time', description: 'When its last source left.' },
    duration_seconds: { type: ['number', 'null'], description: 'Playing time, measured from the file once complete.' },
    size_bytes: { type: 'integer', minimum: 0 },
    content_type: {
      type: 'string',
      description: "The stream's own codec, kept as sent: audio/mpeg, audio/aac or audio/ogg.",
    },
    titles: {
      type: 'array',
      description: 'Titles the stream announced during the show (now-playing history).',
      items: {
        type: 'object',
        properties: { title: { type: 'string' }, artist: { type: ['string', 'null'] }, started_at: { type: 'string' } },
      },
    },
    source_sessions: { type: 'integer', minimum: 1, description: 'Source connections the show was made of.' },
    stop_reason: { type: ['string', 'null'], description: 'storage_full when it stopped because the storage was.' },
    kept_until: {
      type: ['string', 'null'],
      format: 'date-time',
      description:
        "Kept until then past the service's end (retention bought with POST /services/{service_id}/recordings/retention); null: deleted with the service.",
    },
    download_url: { type: 'string', format: 'uri', description: 'The audio; range requests supported.' },
  },
};

const settingSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['enabled', 'public', 'storage', 'refused_because', 'podcast_feed'],
  properties: {
    enabled: { type: 'boolean' },
    public: { type: 'boolean', description: 'The feed and finished recordings are readable without credentials.' },
    storage: {
      type: 'object',
      required: ['bought_bytes', 'used_bytes'],
      properties: { bought_bytes: { type: 'integer' }, used_bytes: { type: 'integer' } },
      description:
        "bought: the product's included limits.recording_storage_mb plus the order's recording_storage_gb; used: every recording's size.",
    },
    refused_because: {
      type: ['string', 'null'],
      description: 'Why it does not record although enabled (storage full).',
    },
    podcast_feed: { type: 'string', format: 'uri' },
  },
};

const listSchema = {
  type: 'object',
  required: ['ok', 'recording', 'recordings'],
  properties: {
    ok: { const: true },
    recording: { $ref: '#/components/schemas/RecordingSetting' },
    recordings: { type: 'array', items: { $ref: '#/components/schemas/Recording' }, description: 'Newest first.' },
  },
};

const tag =
  'Live shows kept: with recording on (order parameter `recording: true`, or PUT /services/{id}/recording), each ' +
  'live show (source connection; a drop under a minute continues it) becomes a recording of the audio as sent, ' +
  "counted against the service's recording storage, listed in a podcast feed (endpoints.podcast_feed) and on the " +
  'listen page. Recordings end with the service (deleted once it cannot be extended any more) unless retention ' +
  'is bought for them (POST /services/{service_id}/recordings/retention, the audio-storage-api product).';

/** OpenAPI for the Recordings tag (merged into /openapi.json by src/http/openapi.ts). */
export const part: OpenApiPart = {
  tags: [{ name: 'Recordings', description: tag }],
  schemas: {
    Recording: recordingSchema,
    RecordingSetting: settingSchema,
    RecordingList: listSchema,
    RecordingSettingRequest: recordingSettingSchema,
    RetentionRequest: retentionRequestSchema,
  },
  paths: {
    '/services/{service_id}/recordings': {
      get: {
        ...owner,
        operationId: 'listRecordings',
        summary: "The service's recordings and its recording setting and storage.",
        parameters: [serviceId],
        responses: {
          200: json('Setting and recordings.', 'RecordingList'),
          401: unauthorized,
          402: signIn,
          429: rateLimited,
          404: notFound,
          503: unavailable,
        },
      },
    },
    '/services/{service_id}/recording': {
      put: {
        ...owner,
        operationId: 'setRecording',
        summary: 'Turn recording of live shows on or off; make the feed public or private.',
        parameters: [serviceId],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/RecordingSettingRequest' } } },
        },
        responses: {
          200: {
            description: 'The setting now.',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['ok', 'recording'],
                  properties: { ok: { const: true }, recording: { $ref: '#/components/schemas/RecordingSetting' } },
                },
              },
            },
          },
          401: unauthorized,
          402: signIn,
          429: rateLimited,
          404: notFound,
          409: error('recording_storage_full: delete recordings first; the message says how much is used.'),
          415: error('unsupported_media_type: send JSON.'),
          422: error('invalid_request (the body), or recording_not_offered: the product does not record.'),
          503: unavailable,
        },
      },
    },
    '/services/{service_id}/recordings/{recording_id}': {
      get: {
        ...ownerOrPublic,
        operationId: 'getRecordingFile',
        summary: 'The audio of a recording: whole, or the one byte range asked (206, Accept-Ranges, Content-Range).',
        description:
          'Without credentials when the feed is public, for complete recordings; the owner also reads one still recording.',
        parameters: [serviceId, recordingId],
        responses: {
          200: { description: 'The file.', content: { 'audio/mpeg': {}, 'audio/aac': {}, 'audio/ogg': {} } },
          206: { description: 'The range asked.', content: { 'audio/mpeg': {}, 'audio/aac': {}, 'audio/ogg': {} } },
          401: unauthorized,
          402: signIn,
          429: rateLimited,
          404: error('recording_not_found or service_not_found.'),
          416: error('range_not_satisfiable: the range starts past the end (Content-Range: bytes */size).'),
        },
      },
      delete: {
        ...owner,
        operationId: 'deleteRecording',
        summary: 'Delete a recording and its file (one still recording ends; the next source begins a new one).',
        parameters: [serviceId, recordingId],
        responses: {
          200: {
            description: 'What was deleted.',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['ok', 'deleted'],
                  properties: { ok: { const: true }, deleted: { $ref: '#/components/schemas/Recording' } },
                },
              },
            },
          },
          401: unauthorized,
          402: signIn,
          429: rateLimited,
          404: error('recording_not_found or service_not_found.'),
          503: unavailable,
        },
      },
    },
    '/services/{service_id}/recordings/retention': {
      post: {
        ...owner,
        operationId: 'retainRecordings',
        summary:
          "Keep the service's finished recordings past its end (the audio-storage-api product), paid with x402 like an order.",
        description:
          'First call: 402 with PAYMENT-REQUIRED naming the price: the product base plus ceil(bytes / 1 GiB) x ' +
          'retention_days x pricing.per_gb_day_atomic (catalog rules; replayable from the audit chain). The ' +
          "recordings priced (configuration.recording_ids, storage_bytes) are kept until the later of the service's " +
          'end and the payment, plus retention_days (kept_until on each); buying again adds days. Downloads and the ' +
          'podcast feed keep working after the service ended; not refunded once applied, nor by a stop. The answer ' +
          'also lists the finished recordings with their kept_until.',
        parameters: [
          serviceId,
          { ...idempotencyHeader(true), description: 'A new value per purchase; reuse it when you retry it.' },
          paymentSignatureHeader,
        ],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/RetentionRequest' } } },
        },
        responses: {
          200: paidResponse('The order (configuration: recording_ids, storage_bytes, storage_gb, retention_days).'),
          400: error('idempotency_key_missing or malformed, payment_id_invalid.'),
          401: unauthorized,
          402: paymentRequired,
          404: notFound,
          409: error(
            'no_recordings, recording_gone (a recording priced was deleted: nothing is charged), ' +
              'retention_in_progress, amount_out_of_range, product_not_orderable, payment_already_used.',
          ),
          422: error('invalid_request: error.details points at the problem (retention_days outside its bounds).'),
          429: rateLimited,
          503: unavailable,
        },
      },
    },
    '/services/{service_id}/podcast.xml': {
      get: {
        ...ownerOrPublic,
        operationId: 'getPodcastFeed',
        summary: "The podcast feed of the station's complete recordings (RSS 2.0 with the iTunes namespace).",
        description:
          "Channel: the station's name, description and artwork (its profile), language, category, explicit; " +
          'items: title, guid, pubDate, enclosure (url, length, type), itunes:duration. Public unless the owner made it private.',
        parameters: [serviceId],
        responses: {
          200: { description: 'The feed.', content: { 'application/rss+xml': { schema: { type: 'string' } } } },
          401: unauthorized,
          402: signIn,
          429: rateLimited,
          404: notFound,
        },
      },
    },
  },
};
