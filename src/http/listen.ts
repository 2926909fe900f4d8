import { readFile } from 'node:fs/promises';
import Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import {
  archiveOf,
  EMBED_SIZE,
  embedSnippet,
  listenAsset,
  listenPageHtml,
  pagePolicy,
  unavailablePageHtml,
  type ListenLookup,
  type ListenPages,
} from '../listen/index.js';
import type { MediaLibrary } from '../services/index.js';
import { ARTWORK_NAME, artworkFileOf } from '../station-profile/index.js';
import type { ErrorLogger } from './error-document.js';

export interface ListenRouteDeps {
  listen?: ListenPages;
  /** Where the stations' artwork is kept (beside the services' media). */
  media?: MediaLibrary;
  /** The API's public address (…/api/v1): the pages' links are built from it, so they work behind a proxy. */
  publicBaseUrl: () => string;
  logError: ErrorLogger;
}

const TITLES: Record<Exclude<ListenLookup['kind'], 'on_air'>, string> = {
  unknown: 'No such stream',
  ended: 'This stream has ended',
  off_air: 'This stream is not on air',
};
const UNKNOWN_REASON = 'There is no stream at this address. Check the link you were given.';

/**
 * The public side of a service: its listen page, the embeddable player, the JSON both read, oEmbed and the
 * page's scripts. No credentials, no owner data; rate limited like every public route (the envelope).
 */
export function listenRoutes(router: Router, deps: ListenRouteDeps): void {
  const assetsUrl = () => `${deps.publicBaseUrl()}/listen/assets`;

  router.get('/listen/assets/:name', (ctx) => {
    const asset = listenAsset(ctx.params.name);
    if (!asset) {
      throw new ApiError(
        404,
        'asset_not_found',
        'There is no such listen page asset. Open a listen page (endpoints.listen_page of a service) instead.',
      );
    }
    ctx.type = asset.type;
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = asset.body;
  });

  router.get('/listen/oembed', async (ctx) => {
    const serviceId = listenPageId(String(ctx.query.url ?? ''), deps.publicBaseUrl());
    if (ctx.query.format !== undefined && ctx.query.format !== 'json') {
      throw new ApiError(
        501,
        'oembed_format_not_supported',
        'Only format=json is offered. Ask again with format=json or without format.',
      );
    }
    const found = serviceId ? await lookup(deps, serviceId) : { kind: 'unknown' as const };
    if (found.kind !== 'on_air') throw noStream(found);
    const width = embedWidth(ctx.query.maxwidth);
    ctx.set('Cache-Control', 'no-cache');
    ctx.body = {
      version: '1.0',
      type: 'rich',
      provider_name: 'agent-audio-api',
      provider_url: new URL(deps.publicBaseUrl()).origin,
      title: found.view.station_name,
      html: embedSnippet(found.view, width),
      width,
      height: EMBED_SIZE.height,
      thumbnail_url: found.view.artwork_url ?? `${assetsUrl()}/station.png`,
    };
  });

  router.get('/listen/:service_id/artwork/:name', async (ctx) => {
    const image = await artwork(deps, ctx.params.service_id, ctx.params.name);
    sendImage(ctx, image);
  });

  router.get('/listen/:service_id/track-artwork/:name', async (ctx) => {
    const image = await trackArtwork(deps, ctx.params.service_id, ctx.params.name);
    sendImage(ctx, image);
  });

  router.get('/listen/:service_id/now-playing', async (ctx) => {
    const found = await lookup(deps, ctx.params.service_id);
    if (found.kind !== 'on_air') throw noStream(found);
    ctx.set('Cache-Control', 'no-cache');
    ctx.body = { ok: true, listen: found.view };
  });

  router.get('/listen/:service_id', listenPage(deps, assetsUrl, false));
  router.get('/listen/:service_id/embed', listenPage(deps, assetsUrl, true));
}

/** The listen page, or its embeddable player: the service on air, or a page saying why not. */
function listenPage(deps: ListenRouteDeps, assetsUrl: () => string, embed: boolean) {
  return async (ctx: Context) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Content-Security-Policy', pagePolicy(embed));
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cache-Control', 'no-cache');
    const found = await lookup(deps, ctx.params.service_id).catch((err: unknown) => {
      deps.logError({ err, request_id: ctx.state.requestId, path: ctx.path }, 'listen page failed');
      return undefined;
    });
    if (!found) {
      ctx.status = 503;
      ctx.set('Retry-After', '5');
      const reason = 'This page could not be shown just now. Reload it in a few seconds.';
      ctx.body = unavailablePageHtml('Try again in a moment', reason, embed);
    } else if (found.kind !== 'on_air') {
      ctx.status = found.kind === 'unknown' ? 404 : found.status;
      const reason = found.kind === 'unknown' ? UNKNOWN_REASON : found.reason;
      ctx.body = unavailablePageHtml(TITLES[found.kind], reason, embed);
    } else {
      const pageUrl = encodeURIComponent(found.view.listen_page);
      const oembedUrl = `${deps.publicBaseUrl()}/listen/oembed?format=json&url=${pageUrl}`;
      const archive = embed
        ? undefined
        : await archiveOf(deps.listen!.recordings, found.view.service_id, deps.publicBaseUrl());
      ctx.body = listenPageHtml(found.view, { embed, assetsUrl: assetsUrl(), oembedUrl, archive });
    }
  };
}

/** The favicon at the site's root, where browsers ask for it whatever the page says. */
export function siteIconRoutes(): Router {
  const router = new Router();
  router.get('/favicon.ico', (ctx) => {
    const icon = listenAsset('favicon.ico')!;
    ctx.type = icon.type;
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.body = icon.body;
  });
  return router;
}

// An embed narrower than its natural width still fits: the name and title are cut with an ellipsis.
const MIN_EMBED_WIDTH = 280;

function embedWidth(raw: unknown): number {
  const asked = typeof raw === 'string' && /^\d{1,5}$/.test(raw) ? Number(raw) : EMBED_SIZE.width;
  return Math.max(MIN_EMBED_WIDTH, Math.min(EMBED_SIZE.width, asked));
}

async function artwork(deps: ListenRouteDeps, serviceId: string, name: string) {
  const missing = () =>
    new ApiError(404, 'artwork_not_found', "There is no such artwork. The listen page's JSON names it (artwork_url).");
  if (!ARTWORK_NAME.test(name) || !deps.listen || !deps.media || !/^[a-zA-Z0-9_-]{8,120}$/.test(serviceId))
    throw missing();
  const stored = (await deps.listen.profiles.get(serviceId)).artwork;
  if (stored?.name !== name) throw missing();
  const bytes = await readFile(deps.media.pathOf(serviceId, artworkFileOf(name))).catch(() => undefined);
  if (!bytes) throw missing();
  return { type: stored.content_type, bytes };
}

/** The cover picture of one of the service's uploaded files, by the name the now-playing JSON gives it. */
async function trackArtwork(deps: ListenRouteDeps, serviceId: string, name: string) {
  const missing = () =>
    new ApiError(404, 'artwork_not_found', "There is no such track artwork. The listen page's JSON names it.");
  if (!deps.media || !/^[a-zA-Z0-9_-]{8,120}$/.test(serviceId)) throw missing();
  const stored = await deps.media.trackArtwork(serviceId, name);
  const bytes = stored && (await readFile(stored.path).catch(() => undefined));
  if (!stored || !bytes) throw missing();
  return { type: stored.type, bytes };
}

/** An image stored with the service's media: kept by caches for good (its name changes with it), never sniffed. */
function sendImage(ctx: Context, image: { type: string; bytes: Buffer }): void {
  ctx.type = image.type;
  ctx.body = image.bytes;
  ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Content-Security-Policy', "default-src 'none'");
}

function lookup(deps: ListenRouteDeps, serviceId: string): Promise<ListenLookup> {
  return deps.listen ? deps.listen.lookup(serviceId) : Promise.resolve({ kind: 'unknown' });
}

function noStream(found: Exclude<ListenLookup, { kind: 'on_air' }>): ApiError {
  if (found.kind === 'unknown') {
    return new ApiError(404, 'stream_not_found', `${UNKNOWN_REASON} A service's address is endpoints.listen_page.`);
  }
  if (found.kind === 'ended') {
    return new ApiError(410, 'stream_ended', `${found.reason} Its owner can buy a new stream (POST /orders).`);
  }
  return new ApiError(503, 'stream_off_air', `${found.reason} Ask again in a minute.`, {
    retryable: true,
    retryAfterSeconds: 60,
  });
}

/** The service id in a listen page address of this deployment (…/listen/{id} or …/listen/{id}/embed). */
function listenPageId(url: string, apiBaseUrl: string): string | undefined {
  const prefix = `${apiBaseUrl}/listen/`;
  if (!url.startsWith(prefix)) return undefined;
  return /^([a-zA-Z0-9_-]{8,120})(\/embed)?\/?$/.exec(url.slice(prefix.length))?.[1];
}
