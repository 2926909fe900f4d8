import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import type { HlsClient, HlsManager, HlsSession } from '../hls/index.js';

const serviceId = /^[a-zA-Z0-9_-]{8,120}$/;
const PLAYLIST_TYPE = 'application/vnd.apple.mpegurl';

/**
 * Public HLS of a service (no key: like the Icecast URL, anyone with the address may listen, within the bought
 * places). GET /hls/{service_id}/index.m3u8 admits a listener session and names its media playlist
 * (live.m3u8?session=…), whose segment addresses carry the same token. Playlists are never cached; segments are.
 */
export function hlsRoutes(router: Router, hls: HlsManager | undefined): void {
  const checked = (ctx: Context): string => {
    const id = ctx.params.service_id;
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
    const body = await hls!.master(checked(ctx), clientOf(ctx));
    playlist(ctx, body);
  });
  router.get('/hls/:service_id/live.m3u8', async (ctx) => {
    const { body, session } = await hls!.mediaPlaylist(checked(ctx), tokenOf(ctx), clientOf(ctx));
    playlist(ctx, body);
    countWhenSent(ctx, hls!, session, Buffer.byteLength(body));
  });
  router.get('/hls/:service_id/:segment', async (ctx) => {
    const { body, session } = await hls!.segment(checked(ctx), tokenOf(ctx), ctx.params.segment, clientOf(ctx));
    ctx.type = 'video/mp2t';
    // Segment names are never reused (numbered from the clock), so a segment may be kept.
    ctx.set('Cache-Control', 'public, max-age=60, immutable');
    ctx.body = body;
    countWhenSent(ctx, hls!, session, body.length);
  });
}

function playlist(ctx: Context, body: string): void {
  ctx.type = PLAYLIST_TYPE;
  ctx.set('Cache-Control', 'no-cache');
  ctx.body = body;
}

function clientOf(ctx: Context): HlsClient {
  return { ip: ctx.ip, userAgent: ctx.get('user-agent') };
}

function tokenOf(ctx: Context): string {
  const token = ctx.query.session;
  return typeof token === 'string' ? token : '';
}

/** Bytes are counted once the body has been written in full (a client that went away mid-answer is not charged). */
function countWhenSent(ctx: Context, hls: HlsManager, session: HlsSession, bytes: number): void {
  if (ctx.method === 'HEAD') return;
  ctx.res.once('finish', () => hls.delivered(session, bytes));
}
