import { type HlsPlaylistSettings, playlistHttpBlock, playlistLocations } from './hls-playlist-config.js';

export interface HlsFileServerConfigOptions {
  bind: { host: string; port: number };
  /** The renditions' directory: DATA_DIR/hls/{service_id}/seg<N>-<tag>.ts are served from it. */
  hlsDir: string;
  /** pid file, temporary paths and the error log go here. */
  runDir: string;
  /** How long a cache may keep a segment (about as long as the rendition keeps it). */
  segmentMaxAgeSeconds: number;
  /** Connections at once (the worker's open files allow twice this). */
  maxConnections: number;
  backlog?: number;
  /** Session playlists served from files, serve asked only for what a file cannot answer (hls-playlist-config.ts). */
  playlists?: HlsPlaylistSettings;
}

/** A segment's public path, the only thing served: anything else is a 404 no cache keeps. */
const SEGMENT_PATH = '^/hls/(?<sid>[A-Za-z0-9_-]{8,120})/(?<seg>seg[0-9]{1,12}-[A-Za-z0-9_-]{12}\\.ts)$';

/**
 * nginx.conf for the HLS segment server: one worker (the machine's other core is Icecast's and serve's), files sent
 * with sendfile, every segment with a public Cache-Control and open CORS (browser players fetch from another origin
 * than the page). With `playlists`, admitted sessions' media playlists too (hls-playlist-config.ts), each logged.
 */
export function buildHlsFileServerConfig(o: HlsFileServerConfigOptions): string {
  const q = (value: string) => JSON.stringify(value);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map(
    (kind) => `  ${kind}_temp_path ${q(`${o.runDir}/tmp-${kind}`)};`,
  );
  const host = o.bind.host.includes(':') ? `[${o.bind.host}]` : o.bind.host;
  return `worker_processes 1;
worker_rlimit_nofile ${o.maxConnections * 2 + 64};
pid ${q(`${o.runDir}/nginx.pid`)};
error_log ${q(`${o.runDir}/error.log`)} warn;
events {
  worker_connections ${o.maxConnections};
}
http {
  access_log off;
  server_tokens off;
${o.playlists ? playlistHttpBlock(o.playlists) : ''}
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 30s;
  keepalive_requests 10000;
  open_file_cache max=1000 inactive=10s;
  open_file_cache_errors off;
${temp.join('\n')}
  types { video/mp2t ts; application/vnd.apple.mpegurl m3u8; }
  default_type application/octet-stream;
  server {
    listen ${host}:${o.bind.port} backlog=${o.backlog ?? 4096};
    location ~ ${q(SEGMENT_PATH)} {
      limit_except GET { deny all; }
      alias ${q(`${o.hlsDir}/$sid/$seg`)};
      add_header Cache-Control ${q(`public, max-age=${o.segmentMaxAgeSeconds}`)};
      add_header Access-Control-Allow-Origin "*";
      add_header X-HLS-Segment-Server "nginx";
      # A segment gone (or a wrong tag) is a 404 no cache keeps: the name may be published later.
      error_page 404 @missing;
    }
${o.playlists ? playlistLocations(o.playlists) : ''}    location @missing {
      add_header Cache-Control "no-store" always;
      return 404;
    }
    location / {
      add_header Cache-Control "no-store" always;
      return 404;
    }
  }
}
`;
}
