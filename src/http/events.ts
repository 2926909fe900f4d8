import { PassThrough } from 'node:stream';
import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import {
  EVENT_TYPES,
  publicEvent,
  type EventFeed,
  type EventType,
  type FeedPosition,
  type WebhookEndpoints,
  type WebhookUrlPolicy,
} from '../events/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { ServiceRecords } from '../services/index.js';
import { EventStreamCaps } from './event-stream-caps.js';
import { bodyReader } from './request-body.js';

/** What the event routes need: built in src/cli/serve.ts. */
export interface EventsApi {
  endpoints: WebhookEndpoints;
  feed: EventFeed;
  policy: WebhookUrlPolicy;
  /** Endpoints one API key may have. */
  maxEndpointsPerKey: number;
  heartbeatMs: number;
  /** Open event streams (on this instance) one API key, and one service, may have. */
  maxStreamsPerKey: number;
  maxStreamsPerService: number;
}

export interface EventRouteDeps {
  keys: ApiKeys;
  services?: ServiceRecords;
  events?: EventsApi;
}

export const webhookRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['url'],
  properties: {
    url: {
      type: 'string',
      minLength: 1,
      maxLength: 2048,
      description: 'An https URL on a public address that answers 2xx within 5 s. Redirects are not followed.',
    },
    service_id: {
      type: 'string',
      minLength: 8,
      maxLength: 120,
      pattern: '^[a-zA-Z0-9_-]+$',
      description:
        "Only this service's events (one of your services). Without it: the events of every service of your API key.",
    },
    events: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: { enum: [...EVENT_TYPES] },
      description: 'Only these event types. Without it: every type.',
    },
  },
};

const readWebhook = bodyReader<{ url: string; service_id?: string; events?: EventType[] }>(
  webhookRequestSchema,
  'webhook',
);
const webhookId = /^whk_[A-Za-z0-9_-]{10,40}$/;
const serviceIdPattern = /^[a-zA-Z0-9_-]{8,120}$/;

/** The Events tag: webhook endpoints (signed deliveries) and a service's events as Server-Sent Events. */
export function eventRoutes(router: Router, deps: EventRouteDeps): void {
  const events = deps.events;
  if (!events) return;
  const streams = new EventStreamCaps(events.maxStreamsPerKey, events.maxStreamsPerService);
  const noWebhook = () =>
    new ApiError(
      404,
      'webhook_not_found',
      'There is no webhook endpoint with this id for your API key. GET /webhooks lists yours.',
    );

  router.post('/webhooks', (ctx) => createWebhook(ctx, deps, events));

  router.get('/webhooks', async (ctx) => {
    const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
    ctx.body = { ok: true, webhooks: await events.endpoints.list(key.id) };
  });

  router.delete('/webhooks/:webhook_id', async (ctx) => {
    const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
    if (!webhookId.test(ctx.params.webhook_id) || !(await events.endpoints.remove(key.id, ctx.params.webhook_id)))
      throw noWebhook();
    ctx.body = { ok: true, deleted: ctx.params.webhook_id };
  });

  router.post('/webhooks/:webhook_id/rotate-secret', async (ctx) => {
    const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
    const rotated = webhookId.test(ctx.params.webhook_id)
      ? await events.endpoints.rotate(key.id, ctx.params.webhook_id)
      : undefined;
    if (!rotated) throw noWebhook();
    ctx.body = {
      ok: true,
      webhook: rotated.endpoint,
      secret: rotated.secret,
      secret_note:
        `Shown only now. Until ${rotated.endpoint.previous_secret_valid_until} deliveries carry a v1 signature ` +
        `for the new and for the previous secret.`,
    };
  });

  router.get('/services/:service_id/events', (ctx) => followService(ctx, deps, events, streams));
}

type Events = NonNullable<EventRouteDeps['events']>;

/** POST /webhooks: a new endpoint for the key (or one of its services), its secret shown once. */
async function createWebhook(ctx: Context, deps: EventRouteDeps, events: Events): Promise<void> {
  const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
  events.endpoints.ensureConfigured();
  const body = await readWebhook(ctx);
  if (body.service_id && !(deps.services && (await deps.services.owned(key.id, body.service_id)))) {
    throw new ApiError(
      404,
      'service_not_found',
      'There is no service with this id for your API key. Use service.service_id from your order, or leave ' +
        'service_id out for every service of your key.',
    );
  }
  const refused = await events.policy.refuse(body.url);
  if (refused) {
    throw new ApiError(
      422,
      'webhook_url_not_allowed',
      `This URL cannot receive webhooks: ${refused}. Use an https URL on a public address.`,
      { details: [{ pointer: '/url', code: 'url_not_allowed', message: refused }] },
    );
  }
  if ((await events.endpoints.list(key.id)).length >= events.maxEndpointsPerKey) {
    throw new ApiError(
      409,
      'webhook_limit_reached',
      `This API key already has ${events.maxEndpointsPerKey} webhook endpoints, the most allowed. Delete one ` +
        `(DELETE /webhooks/{webhook_id}) first.`,
    );
  }
  const created = await events.endpoints.create(key.id, {
    url: body.url,
    serviceId: body.service_id,
    events: body.events,
  });
  ctx.status = 201;
  ctx.body = {
    ok: true,
    webhook: created.endpoint,
    secret: created.secret,
    secret_note: 'Shown only now: keep it to verify the X-Agent-Audio-Signature header of each delivery.',
  };
}

/** GET /services/{id}/events: the service's events as Server-Sent Events, for as long as the key stays valid. */
async function followService(
  ctx: Context,
  deps: EventRouteDeps,
  events: Events,
  streams: EventStreamCaps,
): Promise<void> {
  const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
  const serviceId = ctx.params.service_id;
  const service =
    serviceIdPattern.test(serviceId) && deps.services ? await deps.services.owned(key.id, serviceId) : undefined;
  if (!service)
    throw new ApiError(
      404,
      'service_not_found',
      'There is no service with this id for your API key. Use service.service_id from your order.',
    );
  const after = await resumePosition(ctx, events.feed, service.id);
  const close = streams.open(key.id, service.id);
  const authorization = ctx.get('Authorization');
  // Only a refusal of the key ends the stream; a database hiccup does not (the next check decides).
  const keyStillValid = () =>
    deps.keys.authenticate(authorization).then(
      () => true,
      (e) => !(e instanceof ApiError && e.status === 401),
    );
  streamEvents(ctx, events, service.id, after, keyStillValid, close);
}

/** Last-Event-ID (header, or ?last_event_id= for clients that cannot set headers): continue after that event. */
async function resumePosition(ctx: Context, feed: EventFeed, serviceId: string): Promise<FeedPosition | undefined> {
  const query = ctx.query.last_event_id;
  const lastId = ctx.get('Last-Event-ID') || (typeof query === 'string' ? query : undefined);
  if (!lastId) return undefined;
  const position = /^evt_[A-Za-z0-9_-]{4,80}$/.test(lastId) ? await feed.position(serviceId, lastId) : undefined;
  if (!position) {
    throw new ApiError(
      422,
      'unknown_last_event_id',
      `${lastId.slice(0, 100)} is not an event of this service. Send the id of an event you received from ` +
        `it, or no Last-Event-ID to receive every event from the first.`,
    );
  }
  return position;
}

/**
 * text/event-stream: `id:` the event id, `event:` its type, `data:` the event; a comment line every heartbeat. The
 * key is checked again before each event and at each heartbeat: a revoked key's stream ends within a heartbeat.
 */
function streamEvents(
  ctx: Context,
  api: EventsApi,
  serviceId: string,
  after: FeedPosition | undefined,
  keyStillValid: () => Promise<boolean>,
  close: () => void,
): void {
  const stream = new PassThrough();
  const stop = new AbortController();
  ctx.req.socket.setTimeout(0);
  ctx.set('Cache-Control', 'no-cache, no-transform');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.type = 'text/event-stream; charset=utf-8';
  ctx.body = stream;
  stream.write(': events of this service; reconnect with Last-Event-ID to continue\nretry: 2000\n\n');
  const end = () => {
    clearInterval(heartbeat);
    stop.abort();
    close();
  };
  const revoked = async () => {
    if (await keyStillValid()) return false;
    if (!stop.signal.aborted)
      stream.write(': the API key was revoked; a new request with a valid key continues after Last-Event-ID\n\n');
    end();
    return true;
  };
  const heartbeat = setInterval(() => {
    stream.write(': heartbeat\n\n');
    void revoked();
  }, api.heartbeatMs);
  ctx.res.once('close', end);
  void (async () => {
    try {
      for await (const event of api.feed.subscribe(serviceId, after, stop.signal)) {
        if (await revoked()) break;
        stream.write(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(publicEvent(event))}\n\n`);
      }
    } catch {
      // The database went away: the client reconnects with Last-Event-ID and loses nothing.
    } finally {
      end();
      stream.end();
    }
  })();
}
