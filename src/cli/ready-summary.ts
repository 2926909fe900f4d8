import { relative } from 'node:path';
import type { Config } from './config.js';
import type { RunningService } from './serve/index.js';
import { streamingProxy } from './streaming-proxy.js';

const THROUGH = { haproxy: 'through HAProxy', 'front-door': "through serve's front door", none: 'Icecast itself' };

/**
 * What an operator needs once serve is up: where it answers, where the development credentials are, the addresses of
 * its local chain and Icecast, and what to try next. As lines for a terminal (the first two are also what scripts
 * read: "serving on URL" or, for a streaming host, "streaming on URL"; "metrics on URL") and as the fields of one
 * structured 'ready' log entry.
 */
export function readySummary(
  config: Config,
  service: RunningService,
  seconds: number,
): { lines: string[]; fields: Record<string, unknown> } {
  // Relative to where serve was started when it is below it (data/dev.json), else the full path.
  const below = service.dev && relative(process.cwd(), service.dev.file);
  const devFile = below && (below.startsWith('..') ? service.dev!.file : below);
  const next = service.dev ? 'npm run demo' : undefined;
  const rows: [string, string | undefined][] = [
    ['dev.json', devFile && `${devFile} (base URL, API key, chain, a funded buyer wallet)`],
    ['API key', service.dev?.apiKey],
    ['chain RPC', service.chainRpcUrl],
    ['Icecast', service.icecastUrl && `${service.icecastUrl} (${THROUGH[streamingProxy(config.streaming)]})`],
    ['data', config.dataDir],
  ];
  const lines = [
    servingLine(service),
    `metrics on ${service.metricsUrl}`,
    ...rows.filter(([, value]) => value).map(([label, value]) => `  ${label.padEnd(10)} ${value}`),
    `ready in ${seconds.toFixed(1)} s${next ? `; try: ${next}` : ''} (Ctrl-C stops)`,
  ];
  const fields = {
    ...(service.streamingHost ? { streaming_host: service.streamingHost.id } : { base_url: service.baseUrl }),
    metrics_url: service.metricsUrl,
    // Not the API key: log lines end up in collectors; it is in dev.json (and on the terminal's own lines).
    ...(service.dev && { dev_file: service.dev.file }),
    ...(service.chainRpcUrl && { chain_rpc_url: service.chainRpcUrl }),
    ...(service.icecastUrl && { icecast_url: service.icecastUrl, streaming_proxy: streamingProxy(config.streaming) }),
    data_dir: config.dataDir,
    startup_seconds: Number(seconds.toFixed(1)),
    ...(next && { next }),
  };
  return { lines, fields };
}

/** An API's address; a host serves no API: its streams, through its Icecast, are what it serves. */
function servingLine(service: RunningService): string {
  if (!service.streamingHost) return `serving on ${service.baseUrl}`;
  const host = `streaming host ${service.streamingHost.id}`;
  return `streaming on ${service.icecastUrl} (${host}: listeners and sources; the API is on the API instances)`;
}
