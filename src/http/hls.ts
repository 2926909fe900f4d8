import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { HLS_SEGMENT_MAX_AGE_SECONDS, type HlsClient, type HlsManager } from '../hls/index.js';

const serviceId = /^[a-zA-Z0-9_-]{8,120}$/;
const PLAYLIST_TYPE = 'application/vnd.apple.mpegurl';

/**
 * Public HLS of a service (no key: like the Icecast URL, anyone with the address may listen, within the bought
 * places). GET /hls/{service_id}/index.m3u8 names a media playlist under a token signed for one listener session
 * (live.m3u8?session=…), which takes its place when fetched; its segments have the same addresses for every listener
 * and are served by nginx (src/hls/segment-server.ts), or by the route below where nginx is not installed. Where
 * nginx runs, players fetch live.m3u8 from it: it answers admitted sessions itself and passes the rest on to here.
 * Playlists are never cached; segments may be, by any cache.
 */
export function hlsRoutes(router: Router, hls: HlsManager | undefined): void {
  const checked = (ctx: Context): string => {
    const id = ctx.params.service_id;
    // Until a segment is answered: an error or a playlist is kept by no cache in front.
    ctx.set('Cache-Control', 'no-store');
    if (!hls) {
      const message = 'HLS is not available on this deployment (streaming is not running).';
      throw new ApiError(503, 'streaming_unavailable', message, { retryable: true });
    }
    if (!serviceId.test(id)) {
      throw new ApiError(404, 'service_not_found', `No service ${id}: use the hls_url of the service record.`);
    }
    return id;
  };
  router.get('/hls/:service_id/index.m3u8', async (ctx) => {
    playlist(ctx, await hls!.master(checked(ctx)));
  });
  router.get('/hls/:service_id/live.m3u8', async (ctx) => {
    if (ctx.method === 'HEAD') {
      await hls!.checkSession(checked(ctx), tokenOf(ctx));
      playlist(ctx, '');
      return;
    }
    // Passed on by nginx (the session's first fetch, an ended or too fast one): it names the client and its pace.
    const passed = hls!.passedOn(ctx.get('x-hls-gate'), ctx.get('x-hls-client'), ctx.get('x-hls-over-rate'));
    const client = { ...clientOf(ctx), ...(passed?.ip && { ip: passed.ip }) };
    const answer = await hls!.mediaPlaylist(checked(ctx), tokenOf(ctx), client, passed?.overRate);
    playlist(ctx, answer.body);
    // Counted once the body has been written in full (a client that went away mid-answer is not charged).
    ctx.res.once('finish', () => hls!.delivered(answer, Buffer.byteLength(answer.body)));
  });
  router.get('/hls/:service_id/:segment', async (ctx) => {
    const body = await hls!.segment(checked(ctx), ctx.params.segment);
    ctx.type = 'video/mp2t';
    // A segment's name is never reused (numbered from the clock) and is the same for every listener: any cache may
    // keep it.
    ctx.set('Cache-Control', `public, max-age=${HLS_SEGMENT_MAX_AGE_SECONDS}`);
    ctx.body = body;
  });
}

/** Playlists are personal (a session's token) and change every segment: no cache keeps them. */
function playlist(ctx: Context, body: string): void {
  ctx.type = PLAYLIST_TYPE;
  ctx.set('Cache-Control', 'no-store');
  ctx.body = body;
}

function clientOf(ctx: Context): HlsClient {
  return { ip: ctx.ip, userAgent: ctx.get('user-agent') };
}

function tokenOf(ctx: Context): string {
  const token = ctx.query.session;
  return typeof token === 'string' ? token : '';
}
