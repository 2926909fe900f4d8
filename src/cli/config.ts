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
  /** ERC-6492 factories a not-yet-deployed wallet's signature may deploy with (sign-in and payments); none by default. */
  eip6492Factories: string[];
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
    eip6492Factories: factories(env.EIP6492_ALLOWED_FACTORIES),
  };
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

function factories(text: string | undefined): string[] {
  const list = (text ?? '').split(',').map((f) => f.trim()).filter(Boolean);
  const wrong = list.find((f) => !/^0x[0-9a-fA-F]{40}$/.test(f));
  if (wrong) throw new Error(`EIP6492_ALLOWED_FACTORIES must list 0x addresses separated by commas, got ${wrong}`);
  return list;
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
