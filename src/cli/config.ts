import { isIP } from 'node:net';
import { resolve } from 'node:path';

export interface Config {
  dataDir: string;
  host: string;
  port: number;
  databaseUrl?: string;
  catalogDir: string;
  rulesDir: string;
  production: boolean;
  /** Where clients reach this service (scheme, host, optional path; without /api/v1), when not the listen address. */
  publicBaseUrl?: string;
  /** The Prometheus listener: loopback and a free port unless configured. */
  metricsHost: string;
  metricsPort: number;
  /** Reverse proxies (addresses) whose X-Forwarded-For names the client, for per-address limits. */
  trustedProxies: Set<string>;
  /** Webhook deliveries one instance makes at once; of them, per API key (over all instances) and to slow endpoints. */
  webhookConcurrency: number;
  webhookConcurrencyPerKey: number;
  webhookSlowSlots: number;
  /** Open SSE event streams (per instance) one API key may have, and one service may have. */
  eventStreamsPerKey: number;
  eventStreamsPerService: number;
  /** source.connected / .disconnected of a service: at most one of each per window (seconds); the latest state kept. */
  sourceEventWindowSeconds: number;
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): Config {
  const port = portNumber('PORT', env.PORT ?? '8080');
  return {
    dataDir: resolve(env.DATA_DIR ?? './data'),
    host: env.HOST ?? '127.0.0.1',
    port,
    databaseUrl: env.DATABASE_URL || undefined,
    catalogDir: resolve(env.CATALOG_DIR ?? './catalog'),
    rulesDir: resolve(env.RULES_DIR ?? './rules'),
    production: env.AUDIO_API_ENV === 'production',
    publicBaseUrl: publicBaseUrl(env.PUBLIC_BASE_URL),
    metricsHost: env.METRICS_HOST ?? '127.0.0.1',
    metricsPort: portNumber('METRICS_PORT', env.METRICS_PORT ?? '0'),
    trustedProxies: addresses('TRUSTED_PROXIES', env.TRUSTED_PROXIES),
    webhookConcurrency: wholeNumber('WEBHOOK_CONCURRENCY', env.WEBHOOK_CONCURRENCY ?? '16'),
    webhookConcurrencyPerKey: wholeNumber('WEBHOOK_CONCURRENCY_PER_KEY', env.WEBHOOK_CONCURRENCY_PER_KEY ?? '4'),
    webhookSlowSlots: wholeNumber('WEBHOOK_SLOW_SLOTS', env.WEBHOOK_SLOW_SLOTS ?? '4'),
    eventStreamsPerKey: wholeNumber('EVENTS_MAX_STREAMS_PER_KEY', env.EVENTS_MAX_STREAMS_PER_KEY ?? '20'),
    eventStreamsPerService: wholeNumber('EVENTS_MAX_STREAMS_PER_SERVICE', env.EVENTS_MAX_STREAMS_PER_SERVICE ?? '5'),
    sourceEventWindowSeconds: positive('EVENTS_SOURCE_WINDOW_SECONDS', env.EVENTS_SOURCE_WINDOW_SECONDS ?? '30'),
  };
}

function portNumber(name: string, text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${name} must be a port number, got ${text}`);
  return port;
}

function wholeNumber(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a whole number of at least 1, got ${text}`);
  }
  return value;
}

function positive(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`${name} must be a positive number of seconds, got ${text}`);
  }
  return value;
}

function addresses(name: string, text: string | undefined): Set<string> {
  const list = (text ?? '').split(',').map((a) => a.trim()).filter(Boolean);
  const wrong = list.find((a) => isIP(a) === 0);
  if (wrong) throw new Error(`${name} must list IP addresses separated by commas, e.g. 10.0.0.2,10.0.0.3, got ${wrong}`);
  return new Set(list);
}

function publicBaseUrl(text: string | undefined): string | undefined {
  if (!text) return undefined;
  let url: URL | undefined;
  try { url = new URL(text); } catch { /* reported below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || url.username || url.password) {
    throw new Error(`PUBLIC_BASE_URL must be an http(s) URL without query, fragment or credentials, e.g. https://audio.example.com, got ${text}`);
  }
  return url.href.replace(/\/+$/, '');
}
