import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AuditLog, HeadPublisher, loadSigningKey, type HeadSigner } from '../audit/index.js';
import { formatDiagnostic, type Diagnostic } from '../catalog/index.js';
import { LiveSnapshot } from '../catalog/live-snapshot.js';
import { HlsManager, hlsUrlFor, withHlsUsage } from '../hls/index.js';
import {
  ConnectionCap,
  createCallbackListener,
  createRequestListener,
  healthDetails,
  ICECAST_CALLBACK_PREFIX,
  type CheckoutStatus,
} from '../http/index.js';
import {
  beatStreamingHost,
  HostLease,
  HostMonitor,
  HostPlacement,
  HostReconciler,
  hostPoolReport,
  registerStreamingHost,
} from '../hosts/index.js';
import { walletIdentity } from '../identity/index.js';
import { ApiKeys } from '../keys/index.js';
import { ListenPages } from '../listen/index.js';
import type { Logger } from '../log/index.js';
import { McpEndpoint } from '../mcp/index.js';
import { Metrics, startMetricsServer } from '../observability/index.js';
import {
  armCrashPoints,
  extendHint,
  inFlightByHost,
  inFlightOrders,
  OrderRecovery,
  OrderService,
  OrderStore,
} from '../orders/index.js';
import { ChainChecks, PaymentPrecheck } from '../payments/index.js';
import { startCallbackServer } from '../provisioning/index.js';
import { QuoteService } from '../quotes/index.js';
import { Refunds, RefundStore, RefundWorker, type RefundDeps } from '../refunds/index.js';
import {
  AutoDjManager,
  IcecastDecider,
  IcecastUsageMeter,
  LifecycleWorker,
  ListenerPlaces,
  ListenerSessions,
  MediaLibrary,
  NowPlaying,
  RelayManager,
  ServiceRecords,
} from '../services/index.js';
import { treatAsPublic } from '../ssrf/index.js';
import { PeriodicTask } from '../tasks/index.js';
import { Database, migrate, startEmbeddedPostgres, type RunningPostgres } from '../store/index.js';
import { cachedProbe } from './cached-probe.js';
import { signingKeyOptions, type Config } from './config.js';
import { DataDirLock } from './data-dir-lock.js';
import { events, type Events } from './events.js';
import { servedOwnershipProofs } from './ownership-proofs.js';
import { openHttpServer, type HttpServer } from './http-server.js';
import { payments, type Payments } from './payments.js';
import { refuseWhatLosesMoney, warnPreflight } from './preflight.js';
import { BackgroundStop, Shutdown } from './shutdown.js';
import { streaming, type Streaming } from './streaming.js';
import { serviceVersion } from './version.js';

export interface RunningService {
  baseUrl: string;
  metricsUrl: string;
  /** Development: dev.json and the agent API key written to it. */
  dev?: { file: string; apiKey: string };
  chainRpcUrl?: string;
  icecastUrl?: string;
  stop(): Promise<void>;
}

/** How long GET /health answers the chain's state from its last probe (unauthenticated: a flood must not reach the RPC). */
const HEALTH_CHAIN_PROBE_MS = 5000;

/** What every part of the application is built from, once the HTTP server listens. */
interface Foundation {
  config: Config;
  log: Logger;
  db: Database;
  live: LiveSnapshot;
  audit: AuditLog;
  keys: ApiKeys;
  pay: Payments;
  /** Signature checks that need the chain (smart wallets), for callers who have paid nothing yet: cached, budgeted. */
  chainChecks?: ChainChecks;
  stream: Streaming;
  http: HttpServer;
  metrics: Metrics;
  shutdown: Shutdown;
}

/**
 * Brings up everything on embedded defaults (or DATABASE_URL): PostgreSQL, migrations, catalog with hot reload,
 * payments, Icecast, HTTP, then the workers. Each step registers how it is undone; a failed start undoes what ran.
 */
export async function serve(config: Config, log: Logger): Promise<RunningService> {
  const shutdown = new Shutdown(log);
  try {
    // What would lose money (payTo, the RPC's chain, the token's domain) stops the start before anything runs.
    if (config.production) await refuseWhatLosesMoney(config);
    armCrashPoints({ crashAt: config.testHooks.orderCrashAt, pauseAt: config.testHooks.orderPauseAt });
    treatAsPublic(config.testHooks.ssrfPublicAddresses);
    const lock = await DataDirLock.acquire(config.dataDir);
    shutdown.push(() => lock.release());
    // Icecast is waited for here, after the database: a new start on this DATA_DIR finds its port free.
    const icecastStop = new BackgroundStop();
    shutdown.push(icecastStop.waiter);
    const store = await startStore(config, log, shutdown);
    const { live, audit } = await startCatalog(config, log, store.db, shutdown);
    const keys = new ApiKeys(store.db);
    shutdown.push(await keys.listenForRevocations()); // verified keys are cached; revocations are pushed by PostgreSQL
    const signer = await operatorSigner(config, log);
    const pay = await startPayments(config, log, signer, shutdown);
    const stream = startStreaming(config, log, shutdown, icecastStop);
    // Icecast calls back from 127.0.0.1 (see startStreamingHost), so loopback is not capped; nor are trusted proxies.
    const connections = new ConnectionCap(
      config.http.connectionsPerIp,
      new Set(['127.0.0.1', ...config.trustedProxies]),
    );
    const http = await openHttpServer(config, connections, shutdown);
    const metrics = new Metrics(store.db, undefined, config.streaming.downAfterSeconds);
    const chainChecks = pay.ledger && new ChainChecks(pay.ledger);
    const base: Foundation = {
      config,
      log,
      db: store.db,
      live,
      audit,
      keys,
      pay,
      chainChecks,
      stream,
      http,
      metrics,
      shutdown,
    };
    const app = await startApplication(base, signer, connections);
    const metricsServer = await startMetricsServer(metrics.registry, config.metricsHost, config.metricsPort, () =>
      healthDetails({
        live,
        checkout: app.checkout,
        version: serviceVersion,
        checkHealth: app.checkHealth,
        auditHead: app.auditHead,
      }),
    );
    shutdown.push(() => metricsServer.close());
    if (config.role !== 'host') startApiWorkers(base, app);
    if (config.role !== 'api') await startStreamingHost(base, app);
    watchHostPool(base);
    await lock.update({ base_url: http.baseUrl, ...(store.pg && { database_url: store.databaseUrl }) });
    const dev = config.production
      ? undefined
      : await writeDevFile(config, keys, { base_url: http.baseUrl, ...pay.dev });
    log.info({ base_url: http.baseUrl, metrics_url: metricsServer.url, content_hash: live.current.hash }, 'serving');
    if (config.production) shutdown.push(warnPreflight(config, log, store.db));
    const icecastUrl = hosting(base) ? stream.publicUrl() : undefined;
    const chainRpcUrl = pay.dev?.chain.rpc_url;
    return {
      baseUrl: http.baseUrl,
      metricsUrl: metricsServer.url,
      dev,
      chainRpcUrl,
      icecastUrl,
      stop: () => shutdown.run(),
    };
  } catch (e) {
    await shutdown.run();
    throw e;
  }
}

/** The embedded PostgreSQL (unless DATABASE_URL names one), connected and migrated. */
async function startStore(config: Config, log: Logger, shutdown: Shutdown) {
  let pg: RunningPostgres | undefined;
  if (!config.databaseUrl) {
    // PostgreSQL's own output is for LOG_LEVEL=debug; what was done about the data directory is worth a line.
    pg = await startEmbeddedPostgres(config.dataDir, (line, level) =>
      level === 'info' ? log.info({ component: 'postgres' }, line) : log.debug?.({ component: 'postgres' }, line),
    );
    const started = pg;
    shutdown.push(() => started.stop());
  }
  const databaseUrl = config.databaseUrl ?? pg!.url;
  const applied = await migrateOnce(databaseUrl).catch((e) => {
    throw config.databaseUrl ? unreachable(config.databaseUrl, e) : e;
  });
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');
  const db = new Database(databaseUrl, mainPool(config));
  shutdown.push(() => db.close());
  return { db, pg, databaseUrl };
}

/** Migrations wait, unbounded, for another instance migrating the same database; on a connection of their own. */
async function migrateOnce(databaseUrl: string): Promise<string[]> {
  const db = new Database(databaseUrl, { max: 1, name: 'agent-audio migrate' });
  try {
    return await migrate(db);
  } finally {
    await db.close();
  }
}

/** Connections a host-only process takes for what is not its host's own work (see mainPool). */
const HOST_ROLE_MAIN_POOL = 6;

/**
 * The main pool. A host-only process uses it only beside its host's own pool: two sessions that LISTEN (revoked
 * keys, events), the host monitor's pass, webhook deliveries, source events and metrics, a few short statements at a
 * time. Its queries are bounded as the host's own are (HOST_QUERY_TIMEOUT_MS): a host must not hang on a connection
 * a partition left silent, whatever pool the query went through.
 */
function mainPool(config: Config): { max?: number; timeoutMs?: number; name: string } {
  const name = `agent-audio (${config.role})`;
  if (config.role !== 'host') return { name };
  return { max: HOST_ROLE_MAIN_POOL, timeoutMs: config.streaming.queryTimeoutMs, name };
}

/** The catalog and rules being served, reloaded on edit; every version is kept for the audit trail. */
async function startCatalog(config: Config, log: Logger, db: Database, shutdown: Shutdown) {
  const live = await LiveSnapshot.open(config.catalogDir, config.rulesDir);
  shutdown.push(async () => live.close());
  const audit = new AuditLog(db);
  await audit.saveSnapshot(live.current);
  live.on('reloaded', (snapshot) => {
    log.info({ content_hash: snapshot.hash }, 'catalog reloaded');
    audit.saveSnapshot(snapshot).catch((err) => log.error({ err }, 'could not store the reloaded snapshot'));
  });
  live.on('rejected', (diagnostics: Diagnostic[]) => {
    const errors = diagnostics.map(formatDiagnostic);
    log.warn({ errors }, 'catalog edit rejected; still serving the last good version');
  });
  await live.watch({ checkIntervalMs: config.catalogCheckIntervalMs });
  return { live, audit };
}

/** The operator key signs the audit chain's heads and the offers and receipts agents keep. */
async function operatorSigner(config: Config, log: Logger): Promise<HeadSigner | undefined> {
  const signer = await loadSigningKey(signingKeyOptions(config, true));
  if (!signer) {
    log.warn(
      {},
      'audit chain heads, offers and receipts are not signed: set AUDIT_SIGNING_KEY or AUDIT_SIGNING_KEY_FILE (an Ed25519 private key)',
    );
  }
  return signer;
}

async function startPayments(config: Config, log: Logger, signer: HeadSigner | undefined, shutdown: Shutdown) {
  const pay = await payments({
    production: config.production,
    dataDir: config.dataDir,
    log,
    settings: config.payments,
    operatorKey: signer,
    refundKey: config.refunds.privateKey,
    devRefundFunds: config.refunds.devFundsAtomic,
  });
  shutdown.push(() => pay.stop());
  const refundFrom = pay.refunds.wallet?.address.toLowerCase();
  if (refundFrom && pay.gateway && refundFrom === pay.gateway.terms.payTo.toLowerCase()) {
    throw new Error(
      'X402_REFUND_KEY is the key of X402_PAY_TO: refunds must come from a separate hot wallet holding only what refunds need',
    );
  }
  return pay;
}

/** Icecast, supervised; it starts once the HTTP server that answers its callbacks listens (startStreamingHost). */
function startStreaming(config: Config, log: Logger, shutdown: Shutdown, icecastStop: BackgroundStop): Streaming {
  const stream = streaming(config.dataDir, log, config.streaming);
  // Icecast takes over a second to stop by itself: it stops while the steps after it run.
  shutdown.push(icecastStop.starter(() => stream.stop()));
  return stream;
}

/** The parts that read and write services: records, media, now playing, players, HLS. */
function streamingParts(base: Foundation) {
  const { config, log, db, stream, http } = base;
  const hostDb = hostDatabase(base);
  // HLS renditions read the local Icecast: served by instances that run one.
  const places = hosting(base)
    ? new ListenerPlaces(hostDb, log, () => stream.hostId(), config.streaming.admissionFullPassMs)
    : undefined;
  const lease = hosting(base)
    ? new HostLease(config.streaming.downAfterSeconds, config.streaming.heartbeatMs)
    : undefined;
  if (lease) base.metrics.watchLease(lease);
  const hls = hosting(base)
    ? new HlsManager({
        db: hostDb,
        dir: join(config.dataDir, 'hls'),
        icecastUrl: () => stream.localUrl(),
        hostId: () => stream.hostId(),
        log,
        places,
        leaseHeld: () => lease?.held ?? true,
      })
    : undefined;
  const hlsEndpoint = (s: { id: string }): Record<string, string> =>
    hls ? { hls_url: hlsUrlFor(http.publicBaseUrl, s) } : {};
  const services = new ServiceRecords(db, stream, () => http.publicBaseUrl, hlsEndpoint);
  const media = new MediaLibrary(hostDb, config.mediaDir, config.uploads);
  // The owner's titles this process sent to its Icecast: the host reconciler does not send them again.
  const titlesSent = new Map<string, string>();
  const nowPlaying = new NowPlaying(hostDb, () => stream.admin(), titlesSent);
  const api = apiParts(base, hostDb, { media, nowPlaying }, titlesSent);
  const listenerSessions = new ListenerSessions(db);
  const listen = new ListenPages(db, services, api.nowPlaying, () => http.publicBaseUrl);
  const autodj = new AutoDjManager(
    hostDb,
    media,
    () => stream.localUrl() ?? stream.publicUrl(),
    () => stream.admin(),
    log,
    nowPlaying,
  );
  const relays = new RelayManager(hostDb, () => stream.localUrl() ?? stream.publicUrl(), log, config.relayFirstRetryMs);
  return {
    hostDb,
    hls,
    places,
    lease,
    services,
    media,
    nowPlaying,
    titlesSent,
    api,
    listenerSessions,
    listen,
    autodj,
    relays,
  };
}

/**
 * What the API reads and writes of media and now playing, on the main pool: with both roles in one process, its
 * requests neither wait for the host's connections (taken by its passes and Icecast's callbacks) nor fail when
 * those are cut. Storage reservations of uploads are rows (upload_reservations), counted the same from any instance;
 * only the API uploads (the host's AutoDJ lists and reads files), so the probe slots in memory are the API's alone.
 */
function apiParts(
  base: Foundation,
  hostDb: Database,
  hostSide: { media: MediaLibrary; nowPlaying: NowPlaying },
  titlesSent: Map<string, string>,
) {
  const { config, db, stream } = base;
  if (hostDb === db || config.role === 'host') return hostSide;
  return {
    media: new MediaLibrary(db, config.mediaDir, config.uploads),
    nowPlaying: new NowPlaying(db, () => stream.admin(), titlesSent),
  };
}

/**
 * The connections of this host's own work: its passes, Icecast's callbacks, AutoDJ, relays, HLS. Each query is
 * bounded (HOST_QUERY_TIMEOUT_MS) and one that runs out closes its connection: after a partition to PostgreSQL
 * ends, a connection left silent fails one pass, which is logged, and the next runs on a new one. An instance that
 * runs no Icecast uses the main pool.
 */
function hostDatabase(base: Foundation): Database {
  if (!hosting(base)) return base.db;
  const timeoutMs = base.config.streaming.queryTimeoutMs;
  const hostDb = new Database(base.db.url, { max: 10, timeoutMs, name: 'agent-audio host work' });
  base.shutdown.push(() => hostDb.close());
  return hostDb;
}
type StreamingParts = ReturnType<typeof streamingParts>;

/**
 * Orders paid with x402, when payments are there and streams can be sold (an API instance places them on the pool's
 * hosts; an `all` instance needs its own Icecast): the order service, placement and recovery.
 */
function sales(base: Foundation, services: ServiceRecords) {
  const { config, log, db, live, audit, pay, chainChecks, stream, metrics } = base;
  if (!(pay.gateway && pay.ledger && sellsStreams(base))) return {};
  const store = new OrderStore(db);
  const { leaseSeconds, recoveryIntervalMs } = config.orders;
  const deps = { db, orders: store, services, gateway: pay.gateway, ledger: pay.ledger, live, log, metrics };
  const placement = new HostPlacement(db, {
    downAfterSeconds: config.streaming.downAfterSeconds,
    fallbackLimits: stream.limits,
    inFlight: inFlightOrders(live),
  });
  const precheck = new PaymentPrecheck(chainChecks, config.eip6492Factories);
  const orders = new OrderService(db, live, audit, store, services, pay.gateway, deps, {
    leaseSeconds,
    waitForInFlightMs: 3000,
    placement,
    precheck,
    refundAfterMs: config.refunds.provisionTimeoutMs,
  });
  const recovery = new OrderRecovery(store, deps, log, { intervalMs: recoveryIntervalMs, leaseSeconds });
  return { orders, placement, recovery, paymentTerms: pay.gateway.terms };
}

/** Stops and refunds: the owner's stop, and the worker that sends refunds and proves them on chain. */
function refunding(base: Foundation, parts: StreamingParts) {
  const { config, log, db, live, audit, pay, stream, metrics } = base;
  const leaseSeconds = config.orders.leaseSeconds;
  const deps: RefundDeps = {
    db,
    live,
    audit,
    log,
    metrics,
    store: new RefundStore(db),
    ledger: pay.ledger,
    wallet: pay.refunds.wallet,
    receipts: pay.gateway?.receipts,
    network: pay.checkout.network,
    cutter: {
      admin: () => stream.admin(),
      autodj: parts.autodj,
      relays: parts.relays,
      dropListeners: async (id) => {
        await db.query('DELETE FROM listeners WHERE service_id = $1', [id]);
      },
    },
    settings: {
      maxPerDayAtomic: config.refunds.maxPerDayAtomic,
      provisionTimeoutMs: config.refunds.provisionTimeoutMs,
      leaseSeconds,
      walletMissingReason: pay.refunds.missingReason,
    },
  };
  const worker = new RefundWorker(deps, log, { intervalMs: config.refunds.intervalMs, leaseSeconds });
  return { refunds: new Refunds(deps, () => worker.kick()), worker };
}

/** Audit chain heads, signed at start and now and then when nobody asks, so that a rewrite shows in audit verify. */
async function startAuditHead({ config, log, db, shutdown }: Foundation, signer: HeadSigner | undefined) {
  if (!signer) return undefined;
  const auditHead = new HeadPublisher(db, signer);
  const sign = () => auditHead.latest().catch((err) => log.warn({ err }, 'could not sign the audit head'));
  await sign();
  const timer = setInterval(sign, config.audit.headIntervalMs);
  timer.unref();
  shutdown.push(async () => clearInterval(timer));
  return auditHead;
}

/**
 * GET /health's checks: the database, the chain (from a probe a few seconds old at most), this instance's Icecast
 * (when it runs one) and the pool's hosts (ok when one at least is live and up).
 */
function healthCheck(base: Foundation, lease?: HostLease) {
  const { db, pay, stream, config } = base;
  const chainProbe =
    pay.ledger &&
    cachedProbe(HEALTH_CHAIN_PROBE_MS, () =>
      timed(() => pay.ledger!.latestBlock().then((block) => ({ block: String(block) }))),
    );
  return async () => ({
    ...(await checkDatabase(db)),
    ...(chainProbe && { chain: await chainProbe() }),
    ...(pay.facilitatorHealth && { facilitator: await pay.facilitatorHealth() }),
    // Production without its X402_* settings: quotes work, nothing can be paid.
    ...(config.production && !pay.checkout.configured && { payments: { ok: false, error: pay.checkout.reason } }),
    ...(config.role !== 'api' && { icecast: await stream.health() }),
    hosts: await hostsCheck(db, config.streaming.downAfterSeconds, lease && { id: stream.hostId(), lease }),
  });
}

/** Everything agents reach over HTTP and MCP, handed to the listening server; then webhooks start delivering. */
async function startApplication(base: Foundation, signer: HeadSigner | undefined, connections: ConnectionCap) {
  const { config, log, db, live, audit, keys, pay, chainChecks, stream, http, metrics, shutdown } = base;
  const parts = streamingParts(base);
  await parts.api.media.removePartialUploads();
  const checkout: CheckoutStatus = sellsStreams(base)
    ? pay.checkout
    : { ...pay.checkout, available: false, configured: false, reason: `streaming is unavailable: ${stream.reason}` };
  const sold = sales(base, parts.services);
  const refunds = refunding(base, parts);
  const auditHead = await startAuditHead(base, signer);
  const eventing = await events(db, log, config);
  shutdown.push(() => eventing.stop());
  const identity = walletIdentity(
    db,
    keys,
    {
      publicBaseUrl: () => http.publicBaseUrl,
      network: pay.checkout.network,
      challengeSeconds: config.siwxChallengeSeconds,
      allowedFactories: config.eip6492Factories,
      ...(chainChecks && { chain: chainChecks }),
    },
    config.signup,
  );
  const shared = {
    live,
    keys,
    events: eventing.api,
    publicBaseUrl: () => http.publicBaseUrl,
    quotes: new QuoteService(db, live, audit),
    checkout,
    orders: sold.orders,
    services: parts.services,
    refunds: refunds.refunds,
    media: parts.api.media,
    metrics,
    nowPlaying: parts.api.nowPlaying,
    version: serviceVersion,
    logError: (fields: Record<string, unknown>, message: string) => log.error(fields, message),
    ...(sold.paymentTerms && { paymentTerms: sold.paymentTerms }),
  };
  const decider = hosting(base)
    ? new IcecastDecider(
        parts.hostDb,
        log,
        parts.autodj,
        eventing.sourceEvents,
        live,
        parts.hls,
        () => stream.hostId(),
        parts.places,
        (user, pass) => stream.claimForwarded(user, pass),
        () => !parts.lease?.held,
      )
    : undefined;
  if (config.role === 'host') {
    // A host answers its own Icecast's callbacks, and nothing of the API.
    if (!decider) throw new Error(`serve --role host needs its Icecast: ${stream.reason}`);
    http.serve(createCallbackListener(decider, stream.callbackCredentials));
    eventing.start();
    return {
      ...parts,
      decider,
      checkout,
      checkHealth: healthCheck(base, parts.lease),
      auditHead,
      recovery: undefined,
      refundWorker: refunds.worker,
    };
  }
  const mcp = new McpEndpoint({
    ...shared,
    callers: identity.callers,
    selfServiceKeys: identity.selfServiceKeys,
    listenHost: config.host,
    allowedOrigins: config.mcpAllowedOrigins,
  });
  const checkHealth = healthCheck(base, parts.lease);
  http.serve(
    createRequestListener({
      ...shared,
      auditHead,
      checkHealth,
      ...(sold.placement && { capacity: { read: () => poolCapacity(sold.placement) } }),
      listenerSessions: parts.listenerSessions,
      listen: parts.listen,
      hls: parts.hls,
      ...(decider && { icecast: { decider, credentials: stream.callbackCredentials } }),
      log,
      connections,
      trustedProxies: config.trustedProxies,
      mcp,
      identity,
      rateLimits: { perIp: config.http.ratePerIp, perKey: config.http.ratePerKey },
      ownershipProofs: servedOwnershipProofs({
        configured: config.payments.ownershipProofs,
        payTo: sold.paymentTerms?.payTo,
        publicBaseUrl: http.publicBaseUrl,
        production: config.production,
        log,
      }),
    }),
  );
  shutdown.push(() => eventing.stop()); // SSE streams end before the server waits for its connections
  eventing.start();
  return {
    ...parts,
    decider,
    checkout,
    checkHealth,
    auditHead,
    recovery: sold.recovery,
    refundWorker: refunds.worker,
  };
}
type Application = Awaited<ReturnType<typeof startApplication>>;

/** Whether this instance runs an Icecast: a host or both roles, with icecast2 installed. */
function hosting({ config, stream }: Foundation): boolean {
  return config.role !== 'api' && stream.available;
}

/** Whether this instance sells streams: an API instance (on the pool's hosts), or both roles with an Icecast. */
function sellsStreams(base: Foundation): boolean {
  return base.config.role === 'api' || (base.config.role === 'all' && hosting(base));
}

/** What /availability shows: the live hosts, with what is in use and spoken for on each, in placement's order. */
async function poolCapacity(placement: HostPlacement) {
  const hosts = placement.ranked(await placement.pool());
  return { hosts: hosts.map(({ limits, load }) => ({ limits, load })) };
}

/** Registers this host with what it carries and keeps its heartbeat (and with it its lease) while it runs. */
async function joinHostPool({ config, log, db, stream, shutdown }: Foundation, lease: HostLease): Promise<void> {
  const { maxSources, maxListeners, bandwidthKbps, heartbeatMs } = config.streaming;
  const id = stream.hostId();
  const publicUrl = stream.publicUrl();
  await lease.beat(() => registerStreamingHost(db, { id, publicUrl, maxSources, maxListeners, bandwidthKbps }));
  // The beats have a connection of their own, bounded in time: neither a pool taken up by queries hung in a
  // partition nor a beat hung on a silent connection keeps the host from taking its lease again once it heals.
  const beats = new Database(db.url, { max: 1, timeoutMs: lease.beatTimeoutMs, name: 'agent-audio host beats' });
  const beat = () => lease.beat(() => beatStreamingHost(beats, id));
  const heartbeat = new PeriodicTask('host heartbeat', beat, heartbeatMs, log);
  heartbeat.start();
  shutdown.push(async () => {
    await heartbeat.stop();
    lease.stop();
    await beats.close();
  });
}

/** The API's workers: they recover unfinished orders and send refunds, for every host. */
function startApiWorkers({ shutdown }: Foundation, { recovery, refundWorker }: Application): void {
  if (recovery) {
    recovery.start();
    shutdown.push(() => recovery.stop());
  }
  refundWorker.start();
  shutdown.push(() => refundWorker.stop());
}

/**
 * Icecast (its callbacks come to this server on loopback), this host's record, the life-cycle worker that enforces
 * what was bought and meters it, and the reconciler that runs on this host what PostgreSQL places on it.
 */
async function startStreamingHost(base: Foundation, app: Application): Promise<void> {
  const { config, log, live, stream, http, shutdown } = base;
  await stream.start(await callbackBaseUrl(base, app.decider));
  const { hostDb: db, hls, autodj, relays, nowPlaying, places, lease, titlesSent } = app;
  if (stream.available && lease) await joinHostPool(base, lease);
  if (!(stream.available && hls)) return;
  await hls.start();
  shutdown.push(() => hls.stopAll());
  // HLS bytes are counted when a response has been sent: the last ones are saved once the HTTP server has closed.
  http.afterClose(() => hls.totals.save());
  if (places) {
    await places.start();
    shutdown.push(() => places.stop());
  }
  const meter = new IcecastUsageMeter(
    db,
    () => stream.hostId(),
    () => stream.admin(),
    () => stream.accessLogPath(),
    log,
    config.streaming.sourceBudget,
    nowPlaying,
    undefined,
    hls,
  );
  const worker = new LifecycleWorker({
    db,
    live,
    log,
    autodj,
    relays,
    hls,
    places,
    hostId: () => stream.hostId(),
    admin: () => stream.admin(),
    // The meter's state (meter_state.icecast_url) is keyed by the host id: it survives a change of address.
    meter: withHlsUsage(meter, hls.totals),
    intervalMs: config.lifecycleIntervalMs,
    expiringLeadSeconds: config.events.expiringLeadSeconds,
    extendHint: extendHint(live, () => http.publicBaseUrl),
  });
  worker.start();
  const reconciler = new HostReconciler(
    db,
    stream.hostId(),
    {
      admin: () => stream.admin(),
      autodj,
      relays,
      sourceEpoch: (mount) => app.decider?.sourceEpoch(mount),
      leaseHeld: () => lease?.held ?? true,
      titlesSent,
    },
    log,
    config.streaming.reconcileIntervalMs,
  );
  if (lease)
    lease.onLost = () => {
      // Cut off long enough to be counted down: its services may have moved, their notifications lost on the way.
      places?.forget('lease lost');
      void reconciler.fence().catch((err) => log.warn({ err }, 'fencing failed'));
    };
  reconciler.start();
  shutdown.push(async () => {
    await reconciler.stop();
    await worker.stop();
    await autodj.stopAll();
    await relays.stopAll();
  });
}

/** An operator's message for a DATABASE_URL that does not answer (the error itself is written for agents). */
function unreachable(databaseUrl: string, cause: unknown): Error {
  let where = 'it';
  try {
    const url = new URL(databaseUrl);
    where = `${url.hostname}:${url.port || 5432}${url.pathname}`;
  } catch {
    /* not a URL: PostgreSQL's own message below says why */
  }
  const reason =
    (cause as { code?: string }).code === 'store_unavailable'
      ? 'no connection could be made'
      : (cause as Error).message;
  return new Error(
    `the PostgreSQL of DATABASE_URL (${where}) could not be used: ${reason}. Check that it runs, accepts connections from this host and that the URL's user and password are right`,
  );
}

/**
 * The pool's hosts by name, and this host's lease (from memory: shown even when PostgreSQL does not answer); ok when
 * one host at least takes new streams and this one, if it is a host, holds its lease.
 */
async function hostsCheck(db: Database, downAfterSeconds: number, self?: { id: string; lease: HostLease }) {
  const report = await timed(async () => ({ hosts: await hostPoolReport(db, downAfterSeconds) }));
  const checked = self ? { ...report, this_host: { id: self.id, lease: self.lease.state() } } : report;
  const hosts = (checked.hosts ?? []) as Awaited<ReturnType<typeof hostPoolReport>>;
  if (self && !self.lease.held) {
    const error = `this streaming host (${self.id}) lost its lease (no heartbeat written): it serves nothing`;
    return { ...checked, ok: false, error };
  }
  if (!checked.ok || hosts.some((h) => h.live && h.state === 'up')) return checked;
  return { ...checked, ok: false, error: 'no streaming host is live and up: nothing new can be sold' };
}

async function checkDatabase(db: Database) {
  return { database: await timed(() => db.query('SELECT 1').then(() => ({}))) };
}

/** A dependency check: ok and how long it took, or the error it gave. */
async function timed(
  check: () => Promise<Record<string, unknown>>,
): Promise<{ ok: boolean } & Record<string, unknown>> {
  const started = performance.now();
  try {
    const details = await Promise.race([
      check(),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 2 s')), 2000).unref()),
    ]);
    return { ok: true, latency_ms: Math.round((performance.now() - started) * 100) / 100, ...details };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

/** Development mode: a working agent API key in DATA_DIR/dev.json, so a newcomer can call the API at once. */
async function writeDevFile(
  config: Config,
  keys: ApiKeys,
  fields: { base_url: string } & Record<string, unknown>,
): Promise<{ file: string; apiKey: string }> {
  const file = join(config.dataDir, 'dev.json');
  let previous: { api_key?: string } = {};
  try {
    previous = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    /* first start */
  }
  const apiKey =
    previous.api_key && (await keys.verify(previous.api_key))
      ? previous.api_key
      : (await keys.create('development')).token;
  await writeFile(file, `${JSON.stringify({ ...fields, api_key: apiKey }, null, 2)}\n`, { mode: 0o600 });
  return { file, apiKey };
}

/**
 * Every instance watches the pool (one pass at a time across instances): hosts that miss their heartbeat are marked
 * down and their services moved to hosts with room (beside the paid orders placed there and not provisioned yet).
 */
function watchHostPool({ config, log, db, live, metrics, shutdown }: Foundation): void {
  const monitor = new HostMonitor(db, log, {
    downAfterSeconds: config.streaming.downAfterSeconds,
    intervalMs: config.streaming.heartbeatMs,
    inFlight: inFlightByHost(new OrderStore(db), live),
    onPass: (pass) => {
      metrics.hostsMarkedDown.inc(pass.markedDown.length);
      metrics.serviceMoves.inc(pass.moved.length);
    },
  });
  monitor.start();
  shutdown.push(() => monitor.stop());
}

/**
 * Icecast's callbacks go to a bare HTTP server of their own on loopback, without the API's middleware (request log,
 * rate limits, body parsing): Icecast asks one callback at a time, so their cost is the host's admission rate.
 */
async function callbackBaseUrl({ log, http, shutdown, metrics, stream }: Foundation, decider?: IcecastDecider) {
  if (!decider) return `http://127.0.0.1:${http.port}${ICECAST_CALLBACK_PREFIX}`;
  const server = await startCallbackServer({
    decider,
    auth: stream.callbackCredentials,
    onError: (err) => log.error({ err }, 'icecast callback failed; Icecast refuses the client'),
    onAnswered: (action, seconds) => metrics.icecastCallbacks.labels(action).observe(seconds),
  });
  shutdown.push(() => server.close());
  return server.url;
}
