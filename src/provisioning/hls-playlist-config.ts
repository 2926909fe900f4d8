export interface HlsPlaylistSettings {
  /** DATA_DIR/hls-sessions: {service_id}/{token}.m3u8, a link to the rendition's playlist per admitted session. */
  sessionsDir: string;
  /** Where every fetch nginx answers from a file is written, one line each (read by serve in batches). */
  logPath: string;
  /** serve's own address (host:port) and the API's path prefix: what a file cannot answer is asked of it. */
  serve: { hostPort: string; prefix: string };
  /** Sent to serve with each request nginx passes on: the client address and the over-rate flag are believed. */
  gateSecret: string;
  /** One player's pace: fetches a second and how many more at once (session-pace.ts). */
  ratePerSecond: number;
  burst: number;
  /** Proxies (TRUSTED_PROXIES, a CDN's) whose X-Forwarded-For names the client nginx passes on to serve. */
  trustedProxies: string[];
}

/** The session token of a GET or HEAD (empty otherwise: no file, no rate bucket, serve answers). */
const TOKEN_MAP = `"~^(?:GET|HEAD):(?<hls_t>[A-Za-z0-9_-]{38})$" $hls_t;`;

/** The http-level part: the session's token, its rate bucket and the fetch log's line. */
export function playlistHttpBlock(p: HlsPlaylistSettings): string {
  return `  map "$request_method:$arg_session" $hls_session {
    ${TOKEN_MAP}
    default "";
  }
  map $request_method $hls_logged {
    GET 1;
    default 0;
  }
  limit_req_zone $hls_session zone=hls_sessions:10m rate=${p.ratePerSecond}r/s;
  # Connections to serve are kept (a burst of admissions opens no connection each); closed before serve's own
  # keep-alive (5 s) closes them, so no request is sent on a connection serve is closing.
  upstream hls_serve {
    server ${p.serve.hostPort};
    keepalive 32;
    keepalive_timeout 4s;
  }
${p.trustedProxies.map((a) => `  set_real_ip_from ${a};\n`).join('')}  real_ip_header X-Forwarded-For;
  real_ip_recursive on;
  log_format hls_playlist '$msec $hls_session $sid $status $body_bytes_sent $sent_http_etag';
`;
}

/**
 * The media playlist of an admitted session, answered from the file its link points to (the rendition's shared
 * playlist): serve keeps the link while the session holds its place and removes it when the session ends, so an
 * ended, shared or unknown session falls through to serve, which refuses it (or admits a returning one). A session
 * fetching faster than one player is passed to serve too, marked, to be told to wait or ended as shared.
 */
export function playlistLocations(p: HlsPlaylistSettings): string {
  const q = (value: string) => JSON.stringify(value);
  const pass = (
    overRate: string,
  ) => `      proxy_pass http://hls_serve${p.serve.prefix}/hls/$sid/live.m3u8$is_args$args;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host ${q(p.serve.hostPort)};
      proxy_set_header X-HLS-Gate ${q(p.gateSecret)};
      proxy_set_header X-HLS-Client $remote_addr;
      proxy_set_header X-HLS-Over-Rate ${q(overRate)};
      proxy_read_timeout 30s;
      error_page 502 504 = @hls_unavailable;`;
  return `    location ~ "^/hls/(?<sid>[A-Za-z0-9_-]{8,120})/live\\.m3u8$" {
      limit_req zone=hls_sessions burst=${p.burst} nodelay;
      limit_req_status 429;
      limit_req_log_level info;
      error_page 429 = @hls_over_rate;
      root ${q(p.sessionsDir)};
      open_file_cache off;
      if_modified_since off;
      try_files /$sid/$hls_session.m3u8 @hls_serve;
      access_log ${q(p.logPath)} hls_playlist if=$hls_logged;
      add_header Cache-Control "no-store" always;
      add_header Access-Control-Allow-Origin "*" always;
      add_header X-HLS-Playlist-Server "nginx" always;
    }
    location @hls_serve {
${pass('')}
    }
    location @hls_over_rate {
${pass('1')}
    }
    location @hls_unavailable {
      default_type application/json;
      add_header Cache-Control "no-store" always;
      add_header Retry-After "3" always;
      return 503 '{"ok":false,"error":{"code":"streaming_unavailable","message":"The HLS service is busy or restarting; retry in a few seconds.","retryable":true},"request_id":"$request_id"}';
    }
`;
}
