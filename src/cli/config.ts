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
}

/** Settings that exist for the tests alone (fault injection, stand-ins for a public network). */
export const TEST_HOOKS = ['ORDER_CRASH_AT', 'ORDER_PAUSE_AT', 'SSRF_TEST_PUBLIC_ADDRESSES', 'WEBHOOK_ALLOW_INSECURE_LOOPBACK'];

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): Config {
  if (env.AUDIO_API_ENV === 'production') refuseTestHooks(env);
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
  };
}

function refuseTestHooks(env: NodeJS.ProcessEnv): void {
  const set = TEST_HOOKS.filter((name) => env[name]);
  if (set.length) {
    throw new Error(`${set.join(', ')} ${set.length > 1 ? 'are test hooks' : 'is a test hook'} and cannot be set with AUDIO_API_ENV=production: unset ${set.length > 1 ? 'them' : 'it'}`);
  }
}

function portNumber(name: string, text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${name} must be a port number, got ${text}`);
  return port;
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
