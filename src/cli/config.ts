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
  /** Browser origins (scheme://host[:port]) allowed to call the MCP endpoint besides this service's own addresses. */
  mcpAllowedOrigins: string[];
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
    mcpAllowedOrigins: origins('MCP_ALLOWED_ORIGINS', env.MCP_ALLOWED_ORIGINS),
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

function publicBaseUrl(text: string | undefined): string | undefined {
  if (!text) return undefined;
  let url: URL | undefined;
  try { url = new URL(text); } catch { /* reported below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || url.username || url.password) {
    throw new Error(`PUBLIC_BASE_URL must be an http(s) URL without query, fragment or credentials, e.g. https://audio.example.com, got ${text}`);
  }
  return url.href.replace(/\/+$/, '');
}

/** Web origins separated by commas, each as a browser sends it in Origin: scheme://host[:port], no path. */
function origins(name: string, text: string | undefined): string[] {
  return (text ?? '').split(',').map((o) => o.trim()).filter(Boolean).map((origin) => {
    let url: URL | undefined;
    try { url = new URL(origin); } catch { /* reported below */ }
    if (!url || !/^https?:$/.test(url.protocol) || url.pathname !== '/' || url.search || url.hash || url.username || url.password) {
      throw new Error(`${name} must list web origins (scheme://host[:port], no path) separated by commas, e.g. https://inspector.example.com,http://localhost:6274, got ${origin}`);
    }
    return url.origin;
  });
}
