import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import {
  EMBED_SIZE,
  embedSnippet,
  LISTEN_ASSETS,
  listenPageHtml,
  pagePolicy,
  unavailablePageHtml,
  type ListenLookup,
  type ListenPages,
} from '../listen/index.js';
import type { ErrorLogger } from './error-document.js';

export interface ListenRouteDeps {
  listen?: ListenPages;
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
    const asset = Object.hasOwn(LISTEN_ASSETS, ctx.params.name) ? LISTEN_ASSETS[ctx.params.name] : undefined;
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
    ctx.set('Cache-Control', 'no-cache');
    ctx.body = {
      version: '1.0',
      type: 'rich',
      provider_name: 'agent-audio-api',
      provider_url: new URL(deps.publicBaseUrl()).origin,
      title: found.view.station_name,
      html: embedSnippet(found.view),
      ...EMBED_SIZE,
    };
  });

  router.get('/listen/:service_id/now-playing', async (ctx) => {
    const found = await lookup(deps, ctx.params.service_id);
    if (found.kind !== 'on_air') throw noStream(found);
    ctx.set('Cache-Control', 'no-cache');
    ctx.body = { ok: true, listen: found.view };
  });

  const page = (embed: boolean) => async (ctx: Context) => {
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
      ctx.body = listenPageHtml(found.view, { embed, assetsUrl: assetsUrl(), oembedUrl });
    }
  };
  router.get('/listen/:service_id', page(false));
  router.get('/listen/:service_id/embed', page(true));
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
