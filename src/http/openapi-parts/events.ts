import { EVENT_TYPES } from '../../events/index.js';
import { webhookRequestSchema } from '../events.js';

const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const json = (description: string, schema: unknown) => ({ description, content: { 'application/json': { schema } } });
const secured = [{ agentApiKey: [] }];
const webhookId = {
  name: 'webhook_id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^whk_[A-Za-z0-9_-]{10,40}$' },
};
const unauthorized = error('No valid API key: send "Authorization: Bearer <AGENT_API_KEY>".');
const tooMany = error('Too many requests or connections from this address or key: wait Retry-After seconds.');
const signatureNote =
  'Each delivery is a POST with the event as JSON body and the headers X-Agent-Audio-Event-Id (de-duplicate on it: delivery is at least once) ' +
  'and X-Agent-Audio-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")> — one v1 per valid secret (two during the grace period after a rotation). ' +
  'Accept it when some v1 matches and t is within 300 s of now. Answer 2xx within 5 s; other answers, redirects and timeouts are retried with exponential backoff ' +
  '(10 s doubling up to 6 h) for 24 h; an endpoint failing 100 times in a row is disabled. Each endpoint gets one delivery at a time; an endpoint slower than 2 s shares a few slots with other slow ones. The secret is stored to sign (an HMAC key must be recoverable) and shown only once.';

/** OpenAPI for the Events tag: webhook endpoints and SSE (merged into /openapi.json by src/http/openapi.ts). */
const notConfigured = error(
  'webhooks_not_configured: this deployment has no key to seal webhook secrets with (WEBHOOK_SECRETS_KEY); use SSE.',
);

export const part: {
  tags?: { name: string; description: string }[];
  paths: Record<string, unknown>;
  schemas: Record<string, unknown>;
} = {
  tags: [
    {
      name: 'Events',
      description: `What happens to your orders and services, pushed instead of polled: signed webhooks and Server-Sent Events. ${signatureNote}`,
    },
  ],
  schemas: {
    Event: {
      type: 'object',
      required: ['id', 'type', 'created_at', 'service_id', 'order_id', 'data'],
      additionalProperties: false,
      properties: {
        id: { type: 'string', description: 'Stable event id: the same event delivered again carries the same id.' },
        type: { enum: [...EVENT_TYPES] },
        created_at: { type: 'string', format: 'date-time' },
        service_id: { type: ['string', 'null'] },
        order_id: { type: ['string', 'null'] },
        data: {
          type: 'object',
          description:
            'order.paid: product_id, amount_atomic, network, asset, payer, transaction; service.active / upgrade.applied / service.extended: status, product_id, expires_at, limits (service.extended: added_hours); ' +
            'service.suspended / .expired (and .active on a resume): status, previous_status, reason; service.expiring: expires_at, seconds_left, lead_seconds, extend (method, url, body, mcp_tool, price_for_1_hour; or possible: false with the reason); ' +
            'listeners.threshold: listeners, max_listeners, threshold_percent (80 or 100); source.connected / .disconnected: none; ' +
            'service.stopped: reason (stopped), stopped_at, refund_id; refund.sent: refund_id, reason (stopped or provisioning_failed), amount_atomic, to, transaction, order_ids; ' +
            'refund.failed: refund_id, reason, amount_atomic, message; ' +
            'track.changed: title, artist, source (autodj, live or owner), started_at, ' +
            'previous (the track before, as "Artist - Title", or null); ' +
            'service.moved (its streaming host was lost; reconnect the encoder to the new broadcast_url): ' +
            'stream_url, ' +
            'broadcast_url, expires_at, credited_seconds (the unavailable time, added to the expiry), reason.',
        },
      },
    },
    WebhookRequest: webhookRequestSchema,
    Webhook: {
      type: 'object',
      required: [
        'id',
        'url',
        'service_id',
        'events',
        'status',
        'disabled_reason',
        'consecutive_failures',
        'previous_secret_valid_until',
        'created_at',
      ],
      properties: {
        id: { type: 'string' },
        url: { type: 'string' },
        service_id: { type: ['string', 'null'], description: 'null: every service of the API key.' },
        events: { type: ['array', 'null'], items: { enum: [...EVENT_TYPES] }, description: 'null: every event type.' },
        status: { enum: ['enabled', 'disabled'] },
        disabled_reason: { type: ['string', 'null'] },
        consecutive_failures: { type: 'integer' },
        previous_secret_valid_until: {
          type: ['string', 'null'],
          format: 'date-time',
          description:
            'Until then deliveries also carry a v1 signature made with the secret replaced by the last rotation.',
        },
        created_at: { type: 'string', format: 'date-time' },
      },
    },
    WebhookWithSecret: {
      type: 'object',
      required: ['ok', 'webhook', 'secret', 'secret_note'],
      properties: {
        ok: { const: true },
        webhook: { $ref: '#/components/schemas/Webhook' },
        secret: { type: 'string', description: 'The signing secret (whsec_…). Shown only in this answer.' },
        secret_note: { type: 'string' },
      },
    },
  },
  paths: {
    '/webhooks': {
      post: {
        tags: ['Events'],
        operationId: 'createWebhook',
        security: secured,
        summary:
          'Register an https endpoint for signed event deliveries (for every service of your key, or one service).',
        description: `The URL must be https on a public address (no private, loopback, link-local or metadata addresses, checked again at every delivery). ${signatureNote}`,
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/WebhookRequest' } } },
        },
        responses: {
          201: json('Registered; the secret is shown only now.', { $ref: '#/components/schemas/WebhookWithSecret' }),
          401: unauthorized,
          404: error('service_id is not one of your services.'),
          409: error('webhook_limit_reached: delete an endpoint first.'),
          413: error('The body is too large.'),
          415: error('The body must be JSON.'),
          422: error(
            'invalid_request (see error.details) or webhook_url_not_allowed (not https, or not a public address).',
          ),
          429: tooMany,
          503: notConfigured,
        },
      },
      get: {
        tags: ['Events'],
        operationId: 'listWebhooks',
        security: secured,
        summary: 'Your webhook endpoints (never their secrets).',
        responses: {
          200: json('Endpoints', {
            type: 'object',
            required: ['ok', 'webhooks'],
            properties: {
              ok: { const: true },
              webhooks: { type: 'array', items: { $ref: '#/components/schemas/Webhook' } },
            },
          }),
          401: unauthorized,
          429: tooMany,
        },
      },
    },
    '/webhooks/{webhook_id}': {
      delete: {
        tags: ['Events'],
        operationId: 'deleteWebhook',
        security: secured,
        summary: 'Delete an endpoint; deliveries not yet made are dropped.',
        parameters: [webhookId],
        responses: {
          200: json('Deleted', {
            type: 'object',
            required: ['ok', 'deleted'],
            properties: { ok: { const: true }, deleted: { type: 'string' } },
          }),
          401: unauthorized,
          404: error('webhook_not_found'),
          429: tooMany,
        },
      },
    },
    '/webhooks/{webhook_id}/rotate-secret': {
      post: {
        tags: ['Events'],
        operationId: 'rotateWebhookSecret',
        security: secured,
        summary: 'A new signing secret; the previous one keeps signing (a second v1) for 24 h.',
        parameters: [webhookId],
        responses: {
          200: json('Rotated; the new secret is shown only now.', { $ref: '#/components/schemas/WebhookWithSecret' }),
          401: unauthorized,
          404: error('webhook_not_found'),
          429: tooMany,
          503: notConfigured,
        },
      },
    },
    '/services/{service_id}/events': {
      get: {
        tags: ['Events'],
        operationId: 'streamServiceEvents',
        security: secured,
        summary: "The service's events as Server-Sent Events, from its first or after Last-Event-ID, then live.",
        description:
          'text/event-stream: each event has `id:` (the event id), `event:` (its type) and `data:` (the Event as JSON). A comment line comes every 15 s. ' +
          'Reconnect with the Last-Event-ID header (or ?last_event_id=) to continue after the last event received without losing or repeating any. ' +
          'The stream ends within one heartbeat when the API key is revoked. An API key and a service may each have only a few streams open ' +
          '(429 too_many_event_streams beyond). source.connected / source.disconnected are sent at most once each per service per 30 s (the latest state kept). ' +
          'Example: curl -N -H "Authorization: Bearer $KEY" $BASE/services/$ID/events',
        parameters: [
          {
            name: 'service_id',
            in: 'path',
            required: true,
            schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' },
          },
          {
            name: 'Last-Event-ID',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: 'Continue after this event of the service.',
          },
          {
            name: 'last_event_id',
            in: 'query',
            required: false,
            schema: { type: 'string' },
            description: 'The same, for clients that cannot set headers.',
          },
        ],
        responses: {
          200: {
            description: 'The event stream: each data line carries an Event as JSON.',
            content: {
              'text/event-stream': {
                schema: {
                  type: 'string',
                  contentMediaType: 'application/json',
                  contentSchema: { $ref: '#/components/schemas/Event' },
                },
              },
            },
          },
          401: unauthorized,
          404: error('service_not_found'),
          422: error('unknown_last_event_id: the id is not an event of this service.'),
          429: error(
            'Too many requests or connections from this address or key, or too_many_event_streams: this API key or this service already has ' +
              'the most event streams allowed open (close one, or use a webhook); wait Retry-After seconds.',
          ),
        },
      },
    },
  },
};
