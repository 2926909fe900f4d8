import { dirname, join } from 'node:path';
import type { Logger } from '../log/index.js';
import { HlsFileServer, hlsFileServerInstalled, type HlsPlaylistSettings } from '../provisioning/index.js';
import { HLS_SEGMENT_MAX_AGE_SECONDS } from './url.js';

/** HLS_LISTEN and HLS_PUBLIC_URL; false: serve answers segments itself (no nginx). */
export type SegmentServerSettings = { listen?: { host: string; port: number }; publicUrl?: string } | false;

/**
 * nginx serving the renditions' segments (provisioning/hls-file-server.ts), and with `playlists` admitted sessions'
 * media playlists, when it is installed: bound to HLS_LISTEN,
 * else to loopback on a free port. Without nginx, serve's own route answers segments and a warning says so.
 */
export async function startSegmentServer(
  hlsDir: string,
  settings: SegmentServerSettings | undefined,
  log: Logger,
  playlists?: HlsPlaylistSettings,
): Promise<HlsFileServer | undefined> {
  if (settings === false) return undefined;
  if (!hlsFileServerInstalled()) {
    log.warn({ component: 'hls' }, 'nginx is not installed (npm run setup): HLS segments are served by serve itself');
    return undefined;
  }
  const server = new HlsFileServer({
    runDir: join(dirname(hlsDir), 'hls-file-server'),
    hlsDir,
    host: settings?.listen?.host ?? '127.0.0.1',
    port: settings?.listen?.port,
    publicUrl: settings?.publicUrl?.replace(/\/+$/, ''),
    segmentMaxAgeSeconds: HLS_SEGMENT_MAX_AGE_SECONDS,
    playlists,
  });
  server.on('exited', ({ expected, ...e }) => {
    if (!expected) log.warn({ component: 'hls-file-server', ...e }, 'nginx exited; restarting it');
  });
  server.on('restarted', (e) => log.info({ component: 'hls-file-server', ...e }, 'nginx restarted'));
  server.on('restartFailed', (err) => log.error({ component: 'hls-file-server', err }, 'nginx could not be restarted'));
  await server.start();
  log.info({ component: 'hls-file-server', pid: server.pid, url: server.publicUrl }, 'HLS segments served by nginx');
  return server;
}
