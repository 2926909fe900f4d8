import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import type { Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { OrderService } from '../orders/index.js';
import type { RecordingStorageUsage } from '../recordings/index.js';
import type { Refunds } from '../refunds/index.js';
import { extend, setPlaylist, status, stop, upgrade, usage } from '../operations/index.js';
import {
  storageOf,
  type ListenerSessions,
  type MediaLibrary,
  type NowPlaying,
  type ServiceRecords,
  type ServiceRow,
} from '../services/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { callerOf } from './caller.js';
import type { CheckoutStatus } from '../operations/discovery-documents.js';
import { ownedServiceOf } from './owned-service.js';
import { paidCall, sendPlaced } from './paid-call.js';
import { withRefundTerms } from './refund-terms.js';
import { bodyReader } from './request-body.js';
import { idempotencyKey } from './idempotency-key.js';
import { extendRequestSchema, nowPlayingSchema, playlistSchema, upgradeRequestSchema } from './schemas.js';

const readPlaylist = bodyReader<{ playlist: string[]; shuffle?: boolean }>(playlistSchema, 'playlist');

export interface ServiceRouteDeps {
  keys: ApiKeys;
  services?: ServiceRecords;
  media?: MediaLibrary;
  orders?: OrderService;
  /** Stop and refund (POST /services/{id}/stop), and how a stopped service ended. */
  refunds?: Refunds;
  publicBaseUrl: () => string;
  /** Wallet sign-in: the wallet that paid for a service may use it with no key. */
  callers?: Callers;
  /** The catalog being served: its schemas go into the 402's bazaar declaration. */
  live?: LiveSnapshot;
  /** What each service plays (now-playing routes). */
  nowPlaying?: NowPlaying;
  /** Listener sessions (GET /services/{id}/listeners). */
  listenerSessions?: ListenerSessions;
  /** The recordings' storage, in the usage document. */
  recordingStorage?: RecordingStorageUsage;
  /** Why machine payment is off, for the 503 of an upgrade or an extension. */
  checkout?: CheckoutStatus;
}

const readUpgrade = bodyReader<{ product_id: string }>(upgradeRequestSchema, 'upgrade request');
const readNowPlaying = bodyReader<{ title: string; artist?: string | null }>(nowPlayingSchema, 'now playing');
const readExtend = bodyReader<{ duration_hours: number }>(extendRequestSchema, 'extend request');

/** The Services tag: status, usage, AutoDJ files and playlist of a service, for its owner only. */
export function serviceRoutes(router: Router, deps: ServiceRouteDeps): void {
  const owned = (ctx: Context) => ownedServiceOf(ctx, deps);

  router.get('/services', async (ctx) => {
    const caller = await callerOf(ctx, deps, 'The services bought with this API key or paid by this wallet');
    const rows = deps.services
      ? await deps.services.list(caller.kind === 'wallet' ? { payer: caller.address } : { apiKeyId: caller.key.id })
      : [];
    ctx.body = { ok: true, services: rows.map((row) => deps.services!.document(row)) };
  });

  router.get('/services/:service_id', async (ctx) => {
    const service = await owned(ctx);
    ctx.body = { ...(await status(deps, service)), ...(deps.refunds && (await deps.refunds.ofService(service.id))) };
  });

  router.get('/services/:service_id/usage', async (ctx) => {
    const service = await owned(ctx);
    ctx.body = await usage(deps, service);
  });

  changeRoutes(router, deps, owned);
  mediaRoutes(router, deps, owned);
  nowPlayingRoutes(router, deps, owned);
}

type Owned = (ctx: Context) => Promise<ServiceRow>;

/** What an owner changes on a service: stop it, upgrade it, extend it (the last two paid). */
function changeRoutes(router: Router, deps: ServiceRouteDeps, owned: Owned): void {
  router.post('/services/:service_id/stop', async (ctx) => {
    ctx.body = await stop(deps, await owned(ctx));
  });

  router.post('/services/:service_id/upgrade', async (ctx) => {
    const service = await owned(ctx);
    const idempotency = idempotencyKey(ctx, true)!;
    const { product_id: productId } = await readUpgrade(ctx);
    const payment = await paidCall(ctx, deps, 'upgradeService', `/services/${service.id}/upgrade`, productId);
    sendPlaced(ctx, await upgrade(deps, { service, idempotencyKey: idempotency, productId, payment }));
  });

  router.post('/services/:service_id/extend', async (ctx) => {
    const service = await owned(ctx);
    const idempotency = idempotencyKey(ctx, true)!;
    const { duration_hours: hours } = await readExtend(ctx);
    const call = await paidCall(ctx, deps, 'extendService', `/services/${service.id}/extend`, service.product_id);
    const payment = withRefundTerms(call, deps, hours);
    sendPlaced(ctx, await extend(deps, { service, idempotencyKey: idempotency, hours, payment }));
  });
}

/** AutoDJ media of a service: its files and playlist. */
function mediaRoutes(router: Router, deps: ServiceRouteDeps, owned: Owned): void {
  const withStorage = (service: ServiceRow) => storageOf(deps.media, service);

  router.get('/services/:service_id/files', async (ctx) => {
    const service = await owned(ctx);
    ctx.body = {
      ok: true,
      files: deps.media ? await deps.media.list(service.id) : [],
      playlist: service.playlist ?? [],
      shuffle: service.shuffle,
    };
  });

  router.put('/services/:service_id/files/:name', async (ctx) => {
    const service = await owned(ctx);
    const media = withStorage(service);
    const length = ctx.get('Content-Length');
    const file = await media
      .upload(service, ctx.params.name, ctx.req, length ? Number(length) : undefined)
      .catch((e) => {
        if (!ctx.req.complete) ctx.set('Connection', 'close'); // the rest of the body is not read
        throw e;
      });
    ctx.status = 201;
    ctx.body = { ok: true, file };
  });

  router.delete('/services/:service_id/files/:name', async (ctx) => {
    const service = await owned(ctx);
    if (!(await withStorage(service).remove(service.id, ctx.params.name))) {
      throw new ApiError(
        404,
        'file_not_found',
        `There is no file ${ctx.params.name.slice(0, 128)} on this service. GET /services/{service_id}/files ` +
          `lists them.`,
      );
    }
    ctx.body = { ok: true, deleted: ctx.params.name };
  });

  router.put('/services/:service_id/playlist', async (ctx) => {
    const service = await owned(ctx);
    withStorage(service);
    const { playlist, shuffle } = await readPlaylist(ctx);
    ctx.body = await setPlaylist(deps, service, playlist, shuffle);
  });
}

const LISTENERS_PAGE = { default: 50, max: 200 };

/** What a service plays (its owner may set it) and who listens to it, for its owner. */
function nowPlayingRoutes(router: Router, deps: ServiceRouteDeps, owned: Owned): void {
  const unavailable = () =>
    new ApiError(
      503,
      'not_available',
      'This is not available on this deployment (streaming is off). Check GET /api/v1/availability.',
      { retryable: true },
    );

  router.get('/services/:service_id/now-playing', async (ctx) => {
    const service = await owned(ctx);
    if (!deps.nowPlaying) throw unavailable();
    const history = await deps.nowPlaying.history(service.id);
    ctx.body = { ok: true, now_playing: history[0] ?? null, history };
  });

  router.put('/services/:service_id/now-playing', async (ctx) => {
    const service = await owned(ctx);
    const track = await readNowPlaying(ctx);
    if (!deps.nowPlaying) throw unavailable();
    if (service.status !== 'active') {
      throw new ApiError(
        409,
        'service_not_active',
        `This service is ${service.status}: nothing plays on it. ` +
          'Extend or upgrade it first (POST /services/{service_id}/extend).',
      );
    }
    ctx.body = { ok: true, now_playing: await deps.nowPlaying.setByOwner(service, track) };
  });

  router.get('/services/:service_id/listeners', async (ctx) => {
    const service = await owned(ctx);
    if (!deps.listenerSessions) throw unavailable();
    const limit = pageLimit(ctx.query.limit);
    const cursor = ctx.query.cursor;
    if (cursor !== undefined && !(typeof cursor === 'string' && /^\d{1,18}$/.test(cursor))) {
      throw new ApiError(
        400,
        'invalid_cursor',
        'cursor must be the next_cursor of a previous answer. Ask without cursor for the first page.',
      );
    }
    const page = await deps.listenerSessions.page(service.id, limit, cursor);
    ctx.body = { ok: true, ...page, aggregates: await deps.listenerSessions.aggregates(service.id) };
  });
}

function pageLimit(raw: unknown): number {
  if (raw === undefined) return LISTENERS_PAGE.default;
  const limit = typeof raw === 'string' && /^\d{1,4}$/.test(raw) ? Number(raw) : 0;
  if (limit < 1 || limit > LISTENERS_PAGE.max) {
    throw new ApiError(
      400,
      'invalid_limit',
      `limit must be a whole number from 1 to ${LISTENERS_PAGE.max}. Ask without it for ${LISTENERS_PAGE.default}.`,
    );
  }
  return limit;
}
