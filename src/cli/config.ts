import { readFileSync } from 'node:fs';
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
  refunds: RefundConfig;
}

/** Refunds (src/refunds): the hot wallet they are paid from, the daily cap, how long an undelivered order waits. */
export interface RefundConfig {
  /** X402_REFUND_KEY or the file X402_REFUND_KEY_FILE names: a 0x private key, never payTo's. */
  privateKey?: `0x${string}`;
  /** REFUND_MAX_PER_DAY_ATOMIC: refunds over it in 24 hours wait for an operator (refunds approve). */
  maxPerDayAtomic?: bigint;
  /** REFUND_PROVISION_TIMEOUT_SECONDS (600): a paid order not provisioned by then is refunded in full. */
  provisionTimeoutMs: number;
  /** REFUND_INTERVAL_MS (2000): how often the refund worker looks for work. */
  intervalMs: number;
  /** Development: the USDC the embedded chain gives the refund wallet at every start (DEV_REFUND_FUNDS_ATOMIC). */
  devFundsAtomic: bigint;
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
    refunds: refundConfig(env),
  };
}

function refundConfig(env: NodeJS.ProcessEnv): RefundConfig {
  const keyText = env.X402_REFUND_KEY || (env.X402_REFUND_KEY_FILE ? readFileSync(env.X402_REFUND_KEY_FILE, 'utf8').trim() : undefined);
  if (keyText !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(keyText)) {
    throw new Error(`X402_REFUND_KEY${env.X402_REFUND_KEY ? '' : '_FILE'} must be a 0x-prefixed 32-byte hex private key (the refund hot wallet's)`);
  }
  return {
    ...(keyText && { privateKey: keyText as `0x${string}` }),
    ...(env.REFUND_MAX_PER_DAY_ATOMIC && { maxPerDayAtomic: atomic('REFUND_MAX_PER_DAY_ATOMIC', env.REFUND_MAX_PER_DAY_ATOMIC) }),
    provisionTimeoutMs: seconds('REFUND_PROVISION_TIMEOUT_SECONDS', env.REFUND_PROVISION_TIMEOUT_SECONDS ?? '600') * 1000,
    intervalMs: seconds('REFUND_INTERVAL_MS', env.REFUND_INTERVAL_MS ?? '2000'),
    devFundsAtomic: atomic('DEV_REFUND_FUNDS_ATOMIC', env.DEV_REFUND_FUNDS_ATOMIC ?? '1000000000'),
  };
}

function atomic(name: string, text: string): bigint {
  if (!/^[0-9]{1,30}$/.test(text)) throw new Error(`${name} must be a whole number of atomic USDC units (1 USDC = 1000000), got ${text}`);
  return BigInt(text);
}

function seconds(name: string, text: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got ${text}`);
  return value;
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
