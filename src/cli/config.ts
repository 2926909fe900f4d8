import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism } from 'node:os';
import type { DeliveryOptions } from '../events/index.js';
import type { SignupPolicy } from '../identity/index.js';
import type { LogOptions } from '../log/index.js';
import type { SourceBudgetOptions } from '../provisioning/index.js';
import type { UploadLimits } from '../services/index.js';
import { namedNetwork, USDC_NETWORKS, usdcNetwork } from '../chain/networks.js';
import { HLS_SEGMENT_SECONDS } from '../hls/url.js';
import { parseFacilitatorFault, type FacilitatorFault } from '../payments/facilitator-faults.js';
import { SettingError, SettingsReader } from './settings-reader.js';

export { SettingError };

/** What a serve process runs (serve --role): the HTTP API, a streaming host, or both (the embedded default). */
export type ServeRole = 'api' | 'host' | 'all';
export const SERVE_ROLES: readonly ServeRole[] = ['api', 'host', 'all'];

/**
 * Every setting of the service, read once from the environment at start and passed down. Nothing under src/ reads
 * process.env but this module and the CLI entry. A bad value stops the start with one sentence naming the variable.
 */
export interface Config {
  dataDir: string;
  /** serve --role; 'all' unless the command line says otherwise. */
  role: ServeRole;
  /** AutoDJ uploads: where API instances store them and hosts play them from (shared storage in a pool). */
  mediaDir: string;
  host: string;
  port: number;
  databaseUrl?: string;
  catalogDir: string;
  rulesDir: string;
  catalogCheckIntervalMs: number;
  production: boolean;
  /** Where clients reach this service (scheme, host, optional path; without /api/v1), when not the listen address. */
  publicBaseUrl?: string;
  /** The Prometheus listener: loopback and a free port unless configured. */
  metricsHost: string;
  metricsPort: number;
  /** Reverse proxies (addresses) whose X-Forwarded-For names the client, for per-address limits. */
  trustedProxies: Set<string>;
  log: Required<LogOptions>;
  payments: PaymentSettings;
  streaming: StreamingSettings;
  orders: { leaseSeconds: number; recoveryIntervalMs: number };
  lifecycleIntervalMs: number;
  /** The wait before a failing relay upstream is fetched again; it doubles while the failures go on (up to 5 min). */
  relayFirstRetryMs: number;
  /** Requests per second per client address and per API key (0: no limit), connections per address, request time. */
  http: {
    ratePerIp: number;
    ratePerKey: number;
    connectionsPerIp: number;
    requestTimeoutMs: number;
    headersTimeoutMs: number;
  };
  uploads: UploadLimits;
  signup: SignupPolicy;
  siwxChallengeSeconds: number;
  audit: { signingKey?: string; signingKeyFile?: string; headIntervalMs: number };
  events: EventSettings;
  testHooks: TestHooks;
  /**
   * ERC-6492 factories a not-yet-deployed wallet's signature may deploy with (sign-in and payments); none by default.
   */
  eip6492Factories: string[];
  /** Web origins (besides this service's own) whose pages may call the MCP endpoint. */
  mcpAllowedOrigins: string[];
  refunds: RefundConfig;
  /** `agent-audio facilitator`: a facilitator of the official packages behind HTTP, for operators and the tests. */
  facilitator: FacilitatorSettings;
}

export interface FacilitatorSettings {
  /** FACILITATOR_RPC_URL: the chain it settles on (it must be able to send transactions). */
  rpcUrl?: string;
  /** FACILITATOR_KEY_FILE: the 0x private key that pays the settlements' gas. */
  keyFile?: string;
  /** FACILITATOR_FAULT: a test hook, what production facilitators do wrong (src/payments/facilitator-faults.ts). */
  fault?: FacilitatorFault;
  /** FACILITATOR_AUTH_PUBLIC_KEY_FILE: requests must carry an API-key JWT signed by this key's private half. */
  authPublicKeyFile?: string;
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

export interface PaymentSettings {
  payTo?: string;
  facilitatorUrl?: string;
  rpcUrl?: string;
  network: `${string}:${string}`;
  asset?: string;
  maxTimeoutSeconds: number;
  logWindowBlocks: number;
  /** Development with several instances: another instance's local chain, and the dev account this one settles from. */
  chainRpcUrl?: string;
  devFacilitatorAccount: number;
  /** How long one verify or settle at the remote facilitator may take before its outcome counts as unknown. */
  facilitatorTimeoutMs: number;
  /** A verify's own bound: it changes nothing on chain, so its timeout may differ from a settle's. */
  facilitatorVerifyTimeoutMs: number;
  /** X402_FACILITATOR_AUTH_KEY_FILE: an API key (CDP's JSON) that signs a JWT for every facilitator request. */
  facilitatorAuthKeyFile?: string;
  /** X402_OWNERSHIP_PROOFS: payTo's signatures of the public origin (agent-audio ownership-proof makes one). */
  ownershipProofs: string[];
}

/** X402_OWNERSHIP_PROOFS: EIP-191 signatures (0x and 130 hex digits) separated by commas. */
function proofList(text: string): string[] {
  const proofs = text.split(',').map((p) => p.trim());
  if (!proofs.every((p) => /^0x[0-9a-fA-F]{130}$/.test(p)))
    throw new Error('signatures of the public origin by X402_PAY_TO (0x and 130 hex digits each), separated by commas');
  return proofs;
}

/** X402_FACILITATOR_URL: one facilitator, or several separated by commas in the order they are tried. */
function facilitatorUrlList(text: string): string {
  const urls = text.split(',').map((u) => u.trim());
  const accepts = urls.length > 1 ? 'http(s) URLs separated by commas' : 'an http(s) URL';
  const read = urls.map((u) => {
    try {
      const url = new URL(u);
      if (/^https?:$/.test(url.protocol) && !url.search && !url.hash) return url.href.replace(/\/+$/, '');
    } catch {
      /* refused below */
    }
    throw new Error(accepts);
  });
  return read.join(',');
}

export interface StreamingSettings {
  publicUrl?: string;
  hostId?: string;
  maxSources: number;
  maxListeners: number;
  /** Outgoing bandwidth this host may use (kbit/s), recorded for placement and the operator; unset: not limited. */
  bandwidthKbps?: number;
  /** How often this host writes its heartbeat, and after how long without one the pool counts it down. */
  heartbeatMs: number;
  downAfterSeconds: number;
  /**
   * How long one query of the host's own work (reconciler, life-cycle worker, listener places, callbacks, AutoDJ,
   * relays, HLS) may take before it is given up and its connection closed: a partition that ends leaves connections
   * that answer nothing, and a pass waiting on one would never end.
   */
  queryTimeoutMs: number;
  /** How often the host's reconciler brings what runs on it in line with PostgreSQL without being notified. */
  reconcileIntervalMs: number;
  sourceBudget: SourceBudgetOptions;
  /** How often the host's listener places in memory are read again in full (besides PostgreSQL's notifications). */
  admissionFullPassMs: number;
  /** How long HAProxy waits for serve's decision on a listener before it refuses the listener. */
  listenerAdmissionTimeoutMs: number;
  /**
   * A recorded show goes on after a source drop shorter than `gapSeconds`; the recordings of services over for good
   * are looked for every `cleanupIntervalSeconds`.
   */
  recording: { gapSeconds: number; cleanupIntervalSeconds: number };
  /**
   * With ICECAST_PROXY=front-door: listeners and sources reach Icecast through provisioning/front-door.ts (a deep
   * backlog, paced into Icecast); off puts Icecast itself on the public port.
   */
  frontDoor: boolean;
  /** Connections the front door lets into Icecast at once. */
  frontDoorInFlight: number;
  /** ICECAST_PROXY: what holds the public port in front of Icecast, HAProxy (haproxy-config.ts) or the front door. */
  proxy: 'front-door' | 'haproxy';
  /** ICECAST_LISTEN: where listeners and encoders connect (HAProxy, the front door, or Icecast itself). */
  listen?: { host: string; port: number };
  /** HLS_LISTEN: where nginx serves HLS segments (provisioning/hls-file-server.ts); by default a free port. */
  hlsListen?: { host: string; port: number };
  /** HLS_PUBLIC_URL: where players fetch segments from (a CDN in front of HLS_LISTEN), when not that address. */
  hlsPublicUrl?: string;
  /** How long an HLS session that fetched nothing keeps its place (twice a segment's length by default). */
  hlsPresenceMs: number;
}

export interface EventSettings {
  expiringLeadSeconds: number;
  heartbeatMs: number;
  secretGraceSeconds: number;
  secretsKey?: string;
  secretsKeyFile?: string;
  delivery: DeliveryOptions;
  insecureLoopback: boolean;
  /** Open SSE event streams (per instance) one API key may have, and one service may have. */
  maxStreamsPerKey: number;
  maxStreamsPerService: number;
  /** source.connected / .disconnected of a service: at most one of each per window (seconds); the latest state kept. */
  sourceWindowSeconds: number;
}

/** Settings that exist for the tests alone: refused in production. */
export interface TestHooks {
  orderCrashAt?: string;
  orderPauseAt?: string;
  ssrfPublicAddresses: string[];
}

export const TEST_HOOKS = [
  'ORDER_CRASH_AT',
  'ORDER_PAUSE_AT',
  'SSRF_TEST_PUBLIC_ADDRESSES',
  'WEBHOOK_ALLOW_INSECURE_LOOPBACK',
  'FACILITATOR_FAULT',
];

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

export function configFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  stdoutIsTerminal = Boolean(process.stdout.isTTY),
): Config {
  return readConfig(new SettingsReader(env), stdoutIsTerminal);
}

/** The names of every variable configFromEnv reads (docs/configuration.md's table must list each). */
export function settingNames(): Set<string> {
  const reader = new SettingsReader({});
  readConfig(reader, false);
  return reader.names;
}

function readConfig(r: SettingsReader, stdoutIsTerminal: boolean): Config {
  const production = r.choice('AUDIO_API_ENV', ['production', 'development'], 'development') === 'production';
  const testHooks = readTestHooks(r);
  const insecureLoopback = r.flag('WEBHOOK_ALLOW_INSECURE_LOOPBACK', false);
  if (production) refuseTestHooks(r);
  return {
    dataDir: r.path('DATA_DIR', './data'),
    role: 'all',
    mediaDir: r.path('MEDIA_DIR', join(r.path('DATA_DIR', './data'), 'media')),
    host: r.text('HOST') ?? '127.0.0.1',
    port: r.port('PORT', 8080),
    databaseUrl: r.text('DATABASE_URL'),
    catalogDir: r.path('CATALOG_DIR', './catalog'),
    rulesDir: r.path('RULES_DIR', './rules'),
    catalogCheckIntervalMs: r.whole('CATALOG_CHECK_INTERVAL_MS', 500, 10),
    production,
    publicBaseUrl: r.url('PUBLIC_BASE_URL', { bare: true, example: 'https://audio.example.com' }),
    metricsHost: r.text('METRICS_HOST') ?? '127.0.0.1',
    metricsPort: r.port('METRICS_PORT', 0),
    trustedProxies: new Set(r.addresses('TRUSTED_PROXIES')),
    log: {
      format: r.choice('LOG_FORMAT', ['json', 'pretty'], stdoutIsTerminal ? 'pretty' : 'json'),
      level: r.choice('LOG_LEVEL', LOG_LEVELS, 'info'),
    },
    payments: readPayments(r),
    streaming: readStreaming(r),
    orders: {
      leaseSeconds: r.whole('ORDER_LEASE_SECONDS', 30, 1),
      recoveryIntervalMs: r.whole('ORDER_RECOVERY_INTERVAL_MS', 2000, 10),
    },
    lifecycleIntervalMs: r.whole('LIFECYCLE_INTERVAL_MS', 1000, 10),
    relayFirstRetryMs: r.whole('RELAY_FIRST_RETRY_MS', 1000, 10, 300_000),
    http: {
      ratePerIp: r.whole('RATE_LIMIT_PER_IP', 500, 0, Number.MAX_SAFE_INTEGER, '0 turns the limit off'),
      ratePerKey: r.whole('RATE_LIMIT_PER_KEY', 100, 0, Number.MAX_SAFE_INTEGER, '0 turns the limit off'),
      connectionsPerIp: r.whole('MAX_CONNECTIONS_PER_IP', 64, 0, Number.MAX_SAFE_INTEGER, '0: no cap'),
      requestTimeoutMs: r.whole('REQUEST_TIMEOUT_MS', 30_000, 1000),
      headersTimeoutMs: r.whole('HEADERS_TIMEOUT_MS', 10_000, 1000),
    },
    uploads: readUploads(r),
    signup: {
      enabled: r.flag('AGENT_SIGNUP', true),
      keysPerWalletPerHour: r.whole(
        'AGENT_SIGNUP_KEYS_PER_WALLET_PER_HOUR',
        5,
        0,
        Number.MAX_SAFE_INTEGER,
        '0: no limit',
      ),
      keysPerIpPerHour: r.whole('AGENT_SIGNUP_KEYS_PER_IP_PER_HOUR', 20, 0, Number.MAX_SAFE_INTEGER, '0: no limit'),
      liveKeysPerWallet: r.whole('AGENT_SIGNUP_LIVE_KEYS_PER_WALLET', 10, 0, Number.MAX_SAFE_INTEGER, '0: no limit'),
    },
    siwxChallengeSeconds: r.whole('SIWX_CHALLENGE_SECONDS', 300, 1, 900),
    audit: {
      signingKey: r.text('AUDIT_SIGNING_KEY'),
      signingKeyFile: r.text('AUDIT_SIGNING_KEY_FILE'),
      headIntervalMs: r.whole('AUDIT_HEAD_INTERVAL_MS', 10_000, 100),
    },
    events: readEvents(r, insecureLoopback),
    testHooks,
    eip6492Factories: r.custom('EIP6492_ALLOWED_FACTORIES', addressList) ?? [],
    mcpAllowedOrigins: r.custom('MCP_ALLOWED_ORIGINS', webOrigins) ?? [],
    refunds: readRefunds(r),
    facilitator: readFacilitator(r),
  };
}

/** Where the operator key comes from: the settings, else DATA_DIR (created there by serve in development). */
export function signingKeyOptions(config: Config, create: boolean) {
  return {
    dataDir: config.dataDir,
    production: config.production,
    create,
    key: config.audit.signingKey,
    keyFile: config.audit.signingKeyFile,
  };
}

function readRefunds(r: SettingsReader): RefundConfig {
  const file = r.text('X402_REFUND_KEY_FILE');
  const inline = r.text('X402_REFUND_KEY');
  const key = inline ? refundKey(inline, 'X402_REFUND_KEY') : file && refundKeyFile(file);
  return {
    ...(key && { privateKey: key }),
    ...(r.text('REFUND_MAX_PER_DAY_ATOMIC') && { maxPerDayAtomic: r.custom('REFUND_MAX_PER_DAY_ATOMIC', atomic) }),
    provisionTimeoutMs: r.whole('REFUND_PROVISION_TIMEOUT_SECONDS', 600, 0) * 1000,
    intervalMs: r.whole('REFUND_INTERVAL_MS', 2000, 10),
    devFundsAtomic: r.custom('DEV_REFUND_FUNDS_ATOMIC', atomic) ?? 1_000_000_000n,
  };
}

/** The refund wallet's key; what was given is never repeated (it is a secret). */
function refundKey(text: string, source: string): `0x${string}` {
  if (!/^0x[0-9a-fA-F]{64}$/.test(text))
    throw new SettingError(`${source} must be a 0x-prefixed 32-byte hex private key (the refund hot wallet's)`);
  return text as `0x${string}`;
}

/** X402_REFUND_KEY_FILE: one sentence naming the variable when the file is missing, unreadable or holds no key. */
function refundKeyFile(file: string): `0x${string}` {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as { code?: string }).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EACCES'
          ? 'cannot be read by this user'
          : code === 'EISDIR'
            ? 'is a directory'
            : `cannot be read (${code ?? (e as Error).message})`;
    throw new SettingError(
      `X402_REFUND_KEY_FILE names ${file}, which ${why}: point it at the file holding the refund hot ` +
        `wallet's 0x private key, or unset it (refunds then wait)`,
    );
  }
  return refundKey(text.trim(), `X402_REFUND_KEY_FILE ${file}`);
}

function atomic(text: string): bigint {
  if (!/^[0-9]{1,30}$/.test(text)) throw new Error('a whole number of atomic USDC units (1 USDC = 1000000)');
  return BigInt(text);
}

function readPayments(r: SettingsReader): PaymentSettings {
  const network = r.custom('X402_NETWORK', paymentNetwork) ?? USDC_NETWORKS.base.network;
  return {
    payTo: r.custom('X402_PAY_TO', payToAddress),
    facilitatorUrl: r.custom('X402_FACILITATOR_URL', facilitatorUrlList),
    facilitatorAuthKeyFile: r.text('X402_FACILITATOR_AUTH_KEY_FILE'),
    rpcUrl: r.url('X402_RPC_URL'),
    network,
    // The network's USDC unless another token is named (the default of a network we do not know: Base's, as before).
    asset: r.custom('X402_ASSET', tokenAddress) ?? usdcNetwork(network)?.usdc,
    maxTimeoutSeconds: r.whole('X402_MAX_TIMEOUT_SECONDS', 300, 10, 86_400),
    logWindowBlocks: r.whole('X402_LOG_WINDOW_BLOCKS', 2000, 1),
    chainRpcUrl: r.url('CHAIN_RPC_URL'),
    devFacilitatorAccount: r.whole('DEV_FACILITATOR_ACCOUNT', 4, 0, 9),
    facilitatorTimeoutMs: r.whole('X402_FACILITATOR_TIMEOUT_MS', 15_000, 100, 600_000),
    facilitatorVerifyTimeoutMs: r.whole(
      'X402_FACILITATOR_VERIFY_TIMEOUT_MS',
      r.whole('X402_FACILITATOR_TIMEOUT_MS', 15_000, 100, 600_000),
      100,
      600_000,
    ),
    ownershipProofs: r.custom('X402_OWNERSHIP_PROOFS', proofList) ?? [],
  };
}

function readFacilitator(r: SettingsReader): FacilitatorSettings {
  return {
    rpcUrl: r.url('FACILITATOR_RPC_URL'),
    keyFile: r.text('FACILITATOR_KEY_FILE'),
    fault: r.custom('FACILITATOR_FAULT', parseFacilitatorFault),
    authPublicKeyFile: r.text('FACILITATOR_AUTH_PUBLIC_KEY_FILE'),
  };
}

function readStreaming(r: SettingsReader): StreamingSettings {
  const proxy = r.choice('ICECAST_PROXY', ['haproxy', 'front-door'] as const, 'haproxy');
  const frontDoor = r.flag('ICECAST_FRONT_DOOR', true);
  // Off means Icecast itself on the public port: with HAProxy there, the setting would be silently ignored.
  if (!frontDoor && proxy === 'haproxy')
    throw r.refuse(
      'ICECAST_FRONT_DOOR',
      'on with ICECAST_PROXY=haproxy (off needs ICECAST_PROXY=front-door)',
      r.text('ICECAST_FRONT_DOOR')!,
    );
  return {
    publicUrl: r.url('ICECAST_PUBLIC_URL'),
    hostId: r.custom('STREAMING_HOST_ID', hostId),
    maxSources: r.whole('ICECAST_MAX_SOURCES', 100, 1),
    maxListeners: r.whole('ICECAST_MAX_LISTENERS', 5000, 1),
    bandwidthKbps: r.text('HOST_BANDWIDTH_KBPS') === undefined ? undefined : r.whole('HOST_BANDWIDTH_KBPS', 0, 1),
    heartbeatMs: r.whole('HOST_HEARTBEAT_MS', 5000, 100),
    downAfterSeconds: r.whole('HOST_DOWN_AFTER_SECONDS', 30, 1),
    queryTimeoutMs: r.whole('HOST_QUERY_TIMEOUT_MS', 10_000, 100),
    reconcileIntervalMs: r.whole('HOST_RECONCILE_INTERVAL_MS', 5000, 100),
    admissionFullPassMs: r.whole('ADMISSION_FULL_PASS_SECONDS', 30, 1) * 1000,
    listenerAdmissionTimeoutMs: r.whole(
      'LISTENER_ADMISSION_TIMEOUT_MS',
      15_000,
      100,
      55_000,
      "below HAProxy's 60 s wait for a listener's request",
    ),
    recording: {
      gapSeconds: r.whole('RECORDING_GAP_SECONDS', 60, 1),
      cleanupIntervalSeconds: r.whole('RECORDING_CLEANUP_INTERVAL_SECONDS', 60, 1),
    },
    frontDoor,
    frontDoorInFlight: r.whole('ICECAST_FRONT_DOOR_IN_FLIGHT', 32, 1, 90, 'Icecast refuses listeners past 100 waiting'),
    listen: r.custom('ICECAST_LISTEN', listenAddress),
    hlsListen: r.custom('HLS_LISTEN', listenAddress),
    hlsPublicUrl: r.url('HLS_PUBLIC_URL'),
    hlsPresenceMs: r.whole('HLS_PRESENCE_SECONDS', 2 * HLS_SEGMENT_SECONDS, 2, 600) * 1000,
    proxy,
    sourceBudget: {
      windowSeconds: r.number('SOURCE_BITRATE_WINDOW_SECONDS', undefined, 5, 3600),
      tolerance: r.number('SOURCE_BITRATE_TOLERANCE', undefined, 1, 4),
    },
  };
}

function readUploads(r: SettingsReader): UploadLimits {
  const probeConcurrency = r.whole('UPLOAD_PROBE_CONCURRENCY', availableParallelism(), 1);
  return {
    idleTimeoutMs: r.whole('UPLOAD_IDLE_TIMEOUT_MS', 30_000, 100),
    perService: r.whole('UPLOADS_PER_SERVICE', 2, 1),
    probeConcurrency,
    probeQueue: r.whole('UPLOAD_PROBE_QUEUE', probeConcurrency * 4, 0),
    probeWaitMs: 10_000,
    probeLargeBytes: r.whole('UPLOAD_PROBE_LARGE_MB', 16, 1) * 1024 * 1024,
    probeTimeoutMs: 120_000,
    decodeBaseMs: r.whole('UPLOAD_DECODE_BASE_MS', 10_000, 100, 120_000),
    reservationLeaseMs: r.whole('UPLOAD_RESERVATION_LEASE_MS', 60_000, 1000),
  };
}

function readEvents(r: SettingsReader, insecureLoopback: boolean): EventSettings {
  return {
    expiringLeadSeconds: r.whole('EVENTS_EXPIRING_LEAD_SECONDS', 600, 1),
    heartbeatMs: r.whole('EVENTS_HEARTBEAT_MS', 15_000, 100),
    secretGraceSeconds: r.whole('WEBHOOK_SECRET_GRACE_SECONDS', 86_400, 0),
    secretsKey: r.text('WEBHOOK_SECRETS_KEY'),
    secretsKeyFile: r.text('WEBHOOK_SECRETS_KEY_FILE'),
    delivery: readDelivery(r),
    insecureLoopback,
    maxStreamsPerKey: r.whole('EVENTS_MAX_STREAMS_PER_KEY', 20, 1),
    maxStreamsPerService: r.whole('EVENTS_MAX_STREAMS_PER_SERVICE', 5, 1),
    sourceWindowSeconds: r.whole('EVENTS_SOURCE_WINDOW_SECONDS', 30, 1),
  };
}

function readDelivery(r: SettingsReader): DeliveryOptions {
  const timeoutMs = 5000;
  // A lease shorter than an attempt would let a second instance send the same delivery while the first still waits.
  const leaseSeconds = r.whole(
    'WEBHOOK_LEASE_SECONDS',
    60,
    timeoutMs / 1000 + 1,
    Number.MAX_SAFE_INTEGER,
    'longer than the 5 s delivery timeout',
  );
  return {
    intervalMs: r.whole('WEBHOOK_POLL_INTERVAL_MS', 1000, 1),
    leaseSeconds,
    timeoutMs,
    retryBaseSeconds: r.number('WEBHOOK_RETRY_BASE_SECONDS', 10, 0.001, 86_400)!,
    retryMaxSeconds: r.number('WEBHOOK_RETRY_MAX_SECONDS', 6 * 3600, 0.001, 7 * 86_400)!,
    giveUpSeconds: r.number('WEBHOOK_GIVE_UP_SECONDS', 24 * 3600, 0.001, 30 * 86_400)!,
    disableAfterFailures: r.whole('WEBHOOK_DISABLE_AFTER_FAILURES', 100, 1),
    concurrency: r.whole('WEBHOOK_CONCURRENCY', 16, 1),
    perKey: r.whole('WEBHOOK_CONCURRENCY_PER_KEY', 4, 1),
    slowSlots: r.whole('WEBHOOK_SLOW_SLOTS', 4, 1),
    slowMs: 2000,
    slowSeconds: 300,
  };
}

function readTestHooks(r: SettingsReader): TestHooks {
  return {
    orderCrashAt: r.text('ORDER_CRASH_AT'),
    orderPauseAt: r.text('ORDER_PAUSE_AT'),
    ssrfPublicAddresses: r.addresses('SSRF_TEST_PUBLIC_ADDRESSES'),
  };
}

function refuseTestHooks(r: SettingsReader): void {
  const set = TEST_HOOKS.filter((name) => r.text(name));
  if (set.length) {
    const them = set.length > 1 ? 'them' : 'it';
    throw new SettingError(
      `${set.join(', ')} ${set.length > 1 ? 'are test hooks' : 'is a test hook'} and cannot be set with ` +
        `AUDIO_API_ENV=production: unset ${them}`,
    );
  }
}

function listenAddress(text: string): { host: string; port: number } {
  const found = /^(\[[0-9a-fA-F:]+\]|[^:[\]]+):([0-9]{1,5})$/.exec(text);
  const port = Number(found?.[2]);
  if (!found || port < 1 || port > 65535) throw new Error('HOST:PORT, e.g. 0.0.0.0:8000 or [::]:8000');
  return { host: found[1].replace(/^\[|\]$/g, ''), port };
}

/** X402_NETWORK: base or base-sepolia (chain id and USDC of that network), or a CAIP-2 id. */
function paymentNetwork(text: string): `${string}:${string}` {
  const named = namedNetwork(text);
  if (named) return named.network;
  if (!/^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/.test(text))
    throw new Error(`${Object.keys(USDC_NETWORKS).join(', ')} or a CAIP-2 network id such as eip155:8453`);
  return text as `${string}:${string}`;
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/** X402_ASSET: the token's contract (whether it answers the advertised EIP-712 domain is doctor's check). */
function tokenAddress(text: string): `0x${string}` {
  if (!ADDRESS.test(text)) throw new Error('a 0x address (0x and 40 hex digits) of the token contract');
  return text as `0x${string}`;
}

/** X402_PAY_TO: where every payment goes; an address nobody holds the key of loses them all. */
function payToAddress(text: string): `0x${string}` {
  if (!ADDRESS.test(text))
    throw new Error('the 0x address (0x and 40 hex digits) of the wallet that receives payments');
  if (/^0x0{40}$/.test(text))
    throw new Error(
      'the address of the wallet that receives payments, not the zero address (what is paid to it is lost)',
    );
  return text as `0x${string}`;
}

function addressList(text: string): string[] {
  const list = text
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  if (list.some((f) => !/^0x[0-9a-fA-F]{40}$/.test(f))) throw new Error('0x addresses separated by commas');
  return list;
}

function webOrigins(text: string): string[] {
  return text
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean)
    .map((origin) => {
      let url: URL | undefined;
      try {
        url = new URL(origin);
      } catch {
        /* refused below */
      }
      if (
        !url ||
        !/^https?:$/.test(url.protocol) ||
        url.pathname !== '/' ||
        url.search ||
        url.hash ||
        url.username ||
        url.password
      ) {
        throw new Error(
          'web origins (scheme://host[:port], no path) separated by commas, e.g. https://inspector.example.com',
        );
      }
      return url.origin;
    });
}

const HOST_ID = /^[A-Za-z0-9._:-]{1,100}$/;

function hostId(text: string): string {
  if (!HOST_ID.test(text)) throw new Error('1 to 100 letters, digits or . _ : -');
  return text;
}
