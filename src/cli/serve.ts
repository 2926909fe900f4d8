import { once } from 'node:events';
import { createServer } from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { AuditLog, HeadPublisher, loadSigningKey } from '../audit/index.js';
import { formatDiagnostic, type Diagnostic } from '../catalog/index.js';
import {
  answerClientErrors,
  API_PREFIX,
  ConnectionCap,
  createRequestListener,
  healthDetails,
  ICECAST_CALLBACK_PREFIX,
  limitRequestTime,
  type CheckoutStatus,
} from '../http/index.js';
import { walletIdentity } from '../identity/index.js';
import { ApiKeys } from '../keys/index.js';
import type { Logger } from '../log/index.js';
import { LiveSnapshot } from '../catalog/live-snapshot.js';
import { HlsManager, hlsUrlFor, withHlsUsage } from '../hls/index.js';
import { McpEndpoint } from '../mcp/index.js';
import { Metrics, startMetricsServer } from '../observability/index.js';
import { armCrashPoints, extendHint, OrderRecovery, OrderService, OrderStore } from '../orders/index.js';
import { ChainChecks, PaymentPrecheck } from '../payments/index.js';
import { QuoteService } from '../quotes/index.js';
import {
  AutoDjManager,
  IcecastDecider,
  IcecastUsageMeter,
  LifecycleWorker,
  ListenerSessions,
  MediaLibrary,
  NowPlaying,
  RelayManager,
  registerStreamingHost,
  ServiceRecords,
  StreamCapacity,
} from '../services/index.js';
import { ListenPages } from '../listen/index.js';
import { treatAsPublic } from '../ssrf/index.js';
import { Refunds, RefundStore, RefundWorker, type RefundDeps } from '../refunds/index.js';
import { Database, migrate, startEmbeddedPostgres, type RunningPostgres } from '../store/index.js';
import { cachedProbe } from './cached-probe.js';
import { signingKeyOptions, type Config } from './config.js';
import { DataDirLock } from './data-dir-lock.js';
import { events } from './events.js';
import { payments } from './payments.js';
import { streaming } from './streaming.js';
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

/** Brings up everything on embedded defaults (or DATABASE_URL): PostgreSQL, migrations, catalog with hot reload, HTTP. */
/** How long GET /health answers the chain's state from its last probe (it is unauthenticated: a flood must not reach the RPC). */
const HEALTH_CHAIN_PROBE_MS = 5000;

export async function serve(config: Config, log: Logger): Promise<RunningService> {
  const cleanup: (() => Promise<unknown>)[] = [];
  const stop = async () => {
    for (const step of cleanup.reverse()) await step().catch((err) => log.error({ err }, 'shutdown step failed'));
  };
  try {
    armCrashPoints({ crashAt: config.testHooks.orderCrashAt, pauseAt: config.testHooks.orderPauseAt });
    treatAsPublic(config.testHooks.ssrfPublicAddresses);
    const lock = await DataDirLock.acquire(config.dataDir);
    cleanup.push(() => lock.release());
    // Icecast takes over a second to stop by itself: it stops while the steps after it run, and is waited for here.
    let streamStopped: Promise<void> = Promise.resolve();
    cleanup.push(() => streamStopped);

    let pg: RunningPostgres | undefined;
    if (!config.databaseUrl) {
      // PostgreSQL's own output is for LOG_LEVEL=debug; what was done about the data directory is worth a line.
      pg = await startEmbeddedPostgres(config.dataDir, (line, level) =>
        level === 'info' ? log.info({ component: 'postgres' }, line) : log.debug?.({ component: 'postgres' }, line),
      );
      cleanup.push(() => pg!.stop());
    }
    const databaseUrl = config.databaseUrl ?? pg!.url;
    const db = new Database(databaseUrl);
    cleanup.push(() => db.close());
    const applied = await migrate(db).catch((e) => {
      throw config.databaseUrl ? unreachable(config.databaseUrl, e) : e;
    });
    if (applied.length) log.info({ migrations: applied }, 'migrations applied');

    const live = await LiveSnapshot.open(config.catalogDir, config.rulesDir);
    cleanup.push(async () => live.close());
    const audit = new AuditLog(db);
    await audit.saveSnapshot(live.current);
    live.on('reloaded', (snapshot) => {
      log.info({ content_hash: snapshot.hash }, 'catalog reloaded');
      audit.saveSnapshot(snapshot).catch((err) => log.error({ err }, 'could not store the reloaded snapshot'));
    });
    live.on('rejected', (diagnostics: Diagnostic[]) => {
      log.warn(
        { errors: diagnostics.map(formatDiagnostic) },
        'catalog edit rejected; still serving the last good version',
      );
    });
    live.watch({ checkIntervalMs: config.catalogCheckIntervalMs });

    const keys = new ApiKeys(db);
    cleanup.push(await keys.listenForRevocations()); // verified keys are cached; revocations are pushed by PostgreSQL
    // The operator key signs the audit chain's heads and the offers and receipts agents keep.
    const signer = await loadSigningKey(signingKeyOptions(config, true));
    if (!signer)
      log.warn(
        {},
        'audit chain heads, offers and receipts are not signed: set AUDIT_SIGNING_KEY or AUDIT_SIGNING_KEY_FILE (an Ed25519 private key)',
      );
    const pay = await payments({
      production: config.production,
      dataDir: config.dataDir,
      log,
      settings: config.payments,
      operatorKey: signer,
      refundKey: config.refunds.privateKey,
      devRefundFunds: config.refunds.devFundsAtomic,
    });
    if (
      pay.refunds.wallet &&
      pay.gateway &&
      pay.refunds.wallet.address.toLowerCase() === pay.gateway.terms.payTo.toLowerCase()
    ) {
      throw new Error(
        'X402_REFUND_KEY is the key of X402_PAY_TO: refunds must come from a separate hot wallet holding only what refunds need',
      );
    }
    // Signature checks that need the chain (smart wallets), for callers who have paid nothing yet: cached, budgeted.
    const chainChecks = pay.ledger && new ChainChecks(pay.ledger);
    cleanup.push(() => pay.stop());
    const stream = streaming(config.dataDir, log, config.streaming);
    cleanup.push(async () => {
      streamStopped = stream.stop();
    });

    let baseUrl = '';
    let publicBaseUrl = '';
    const metrics = new Metrics(db);
    const hls = stream.available
      ? new HlsManager({
          db,
          dir: join(config.dataDir, 'hls'),
          icecastUrl: () => stream.localUrl(),
          hostId: () => stream.hostId(),
          log,
        })
      : undefined;
    const hlsEndpoint = (s: { id: string }): Record<string, string> =>
      hls ? { hls_url: hlsUrlFor(publicBaseUrl, s) } : {};
    const services = new ServiceRecords(db, stream, () => publicBaseUrl, hlsEndpoint);
    const media = new MediaLibrary(db, join(config.dataDir, 'media'), config.uploads);
    await media.removePartialUploads();
    const nowPlaying = new NowPlaying(db, () => stream.admin());
    const listenerSessions = new ListenerSessions(db);
    const listen = new ListenPages(db, services, nowPlaying, () => publicBaseUrl);
    const autodj = new AutoDjManager(
      db,
      media,
      () => stream.publicUrl(),
      () => stream.admin(),
      log,
      nowPlaying,
    );
    const relays = new RelayManager(db, () => stream.publicUrl(), log, config.relayFirstRetryMs);
    const checkout: CheckoutStatus = stream.available
      ? pay.checkout
      : { ...pay.checkout, available: false, configured: false, reason: `streaming is unavailable: ${stream.reason}` };
    let orders: OrderService | undefined;
    let capacity: StreamCapacity | undefined;
    let recovery: OrderRecovery | undefined;
    if (pay.gateway && pay.ledger && stream.available) {
      const store = new OrderStore(db);
      const { leaseSeconds, recoveryIntervalMs } = config.orders;
      const deps = { db, orders: store, services, gateway: pay.gateway, ledger: pay.ledger, live, log, metrics };
      capacity = new StreamCapacity(db, stream, stream.limits);
      const precheck = new PaymentPrecheck(chainChecks, config.eip6492Factories);
      orders = new OrderService(db, live, audit, store, services, pay.gateway, deps, {
        leaseSeconds,
        waitForInFlightMs: 3000,
        capacity,
        precheck,
        refundAfterMs: config.refunds.provisionTimeoutMs,
      });
      recovery = new OrderRecovery(store, deps, log, { intervalMs: recoveryIntervalMs, leaseSeconds });
    }

    const refundLeaseSeconds = config.orders.leaseSeconds;
    const refundDeps: RefundDeps = {
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
        autodj,
        relays,
        dropListeners: async (id) => {
          await db.query('DELETE FROM listeners WHERE service_id = $1', [id]);
        },
      },
      settings: {
        maxPerDayAtomic: config.refunds.maxPerDayAtomic,
        provisionTimeoutMs: config.refunds.provisionTimeoutMs,
        leaseSeconds: refundLeaseSeconds,
        walletMissingReason: pay.refunds.missingReason,
      },
    };
    const refundWorker = new RefundWorker(refundDeps, log, {
      intervalMs: config.refunds.intervalMs,
      leaseSeconds: refundLeaseSeconds,
    });
    const refunds = new Refunds(refundDeps, () => refundWorker.kick());

    // Icecast calls back from 127.0.0.1 (see streaming.start below), so loopback is not capped; nor are trusted proxies.
    const connections = new ConnectionCap(
      config.http.connectionsPerIp,
      new Set(['127.0.0.1', ...config.trustedProxies]),
    );
    const auditHead = signer && new HeadPublisher(db, signer);
    if (auditHead) {
      // Heads are also signed and kept at start and now and then when nobody asks, so that a rewrite shows in audit verify.
      await auditHead.latest().catch((err) => log.warn({ err }, 'could not sign the audit head'));
      const timer = setInterval(() => {
        auditHead.latest().catch((err) => log.warn({ err }, 'could not sign the audit head'));
      }, config.audit.headIntervalMs);
      timer.unref();
      cleanup.push(async () => clearInterval(timer));
    }

    const eventing = await events(db, log, config);
    cleanup.push(() => eventing.stop());
    const quotes = new QuoteService(db, live, audit);
    const identity = walletIdentity(
      db,
      keys,
      {
        publicBaseUrl: () => publicBaseUrl,
        network: pay.checkout.network,
        challengeSeconds: config.siwxChallengeSeconds,
        allowedFactories: config.eip6492Factories,
        ...(chainChecks && { chain: chainChecks }),
      },
      config.signup,
    );
    const mcp = new McpEndpoint({
      live,
      keys,
      events: eventing.api,
      callers: identity.callers,
      publicBaseUrl: () => publicBaseUrl,
      quotes,
      checkout,
      orders,
      services,
      refunds,
      media,
      metrics,
      nowPlaying,
      version: serviceVersion,
      logError: (fields, message) => log.error(fields, message),
      ...(orders && pay.gateway && { paymentTerms: pay.gateway.terms }),
      listenHost: config.host,
      allowedOrigins: config.mcpAllowedOrigins,
    });
    const chainProbe =
      pay.ledger &&
      cachedProbe(HEALTH_CHAIN_PROBE_MS, () =>
        timed(() => pay.ledger!.latestBlock().then((block) => ({ block: String(block) }))),
      );
    const checkHealth = async () => ({
      ...(await checkDatabase(db)),
      ...(chainProbe && { chain: await chainProbe() }),
      icecast: await stream.health(),
    });
    const listener = createRequestListener({
      events: eventing.api,
      auditHead,
      live,
      keys,
      quotes,
      checkout,
      version: serviceVersion,
      publicBaseUrl: () => publicBaseUrl,
      checkHealth,
      logError: (fields, message) => log.error(fields, message),
      orders,
      ...(capacity && { capacity: { limits: capacity.limits, inUse: () => capacity!.inUse() } }),
      services,
      refunds,
      media,
      nowPlaying,
      listenerSessions,
      listen,
      hls,
      ...(stream.available && {
        icecast: {
          decider: new IcecastDecider(db, log, autodj, eventing.sourceEvents, live, hls),
          credentials: stream.callbackCredentials,
        },
      }),
      metrics,
      log,
      connections,
      trustedProxies: config.trustedProxies,
      mcp,
      identity,
      ...(orders && pay.gateway && { paymentTerms: pay.gateway.terms }),
      rateLimits: { perIp: config.http.ratePerIp, perKey: config.http.ratePerKey },
    });
    // Without Host an HTTP/1.1 request would get Node's bare 400; Koa answers it with an error document instead.
    const server = createServer({ requireHostHeader: false, connectionsCheckingInterval: 1000 }, listener).listen(
      config.port,
      config.host,
    );
    answerClientErrors(server);
    connections.watch(server);
    await once(server, 'listening');
    limitRequestTime(server, config.http.requestTimeoutMs); // uploads have an idle timeout instead
    server.headersTimeout = 10_000;
    server.keepAliveTimeout = 5_000;
    cleanup.push(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
          setTimeout(() => server.closeAllConnections(), 2000).unref();
        }),
    );

    cleanup.push(() => eventing.stop()); // SSE streams end before the server waits for its connections
    eventing.start();

    const metricsServer = await startMetricsServer(metrics.registry, config.metricsHost, config.metricsPort, () =>
      healthDetails({ live, checkout, version: serviceVersion, checkHealth, auditHead }),
    );
    cleanup.push(() => metricsServer.close());

    const { port } = server.address() as AddressInfo;
    baseUrl = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}${API_PREFIX}`;
    publicBaseUrl = config.publicBaseUrl ? `${config.publicBaseUrl}${API_PREFIX}` : baseUrl;
    await stream.start(`http://127.0.0.1:${port}${ICECAST_CALLBACK_PREFIX}`);
    if (stream.available) await registerStreamingHost(db, stream.hostId(), stream.publicUrl());
    if (recovery) {
      recovery.start();
      cleanup.push(() => recovery!.stop());
    }
    refundWorker.start();
    cleanup.push(() => refundWorker.stop());
    if (stream.available && hls) {
      await hls.start();
      cleanup.push(() => hls.stopAll());
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
        hostId: () => stream.hostId(),
        admin: () => stream.admin(),
        // The meter's state (meter_state.icecast_url) is keyed by the host id: it survives a change of address.
        meter: withHlsUsage(meter, hls.totals),
        intervalMs: config.lifecycleIntervalMs,
        expiringLeadSeconds: config.events.expiringLeadSeconds,
        extendHint: extendHint(live, () => publicBaseUrl),
      });
      worker.start();
      cleanup.push(async () => {
        await worker.stop();
        await autodj.stopAll();
        await relays.stopAll();
      });
    }
    await lock.update({ base_url: baseUrl, ...(pg && { database_url: databaseUrl }) });
    const dev = config.production ? undefined : await writeDevFile(config, keys, { base_url: baseUrl, ...pay.dev });
    log.info({ base_url: baseUrl, metrics_url: metricsServer.url, content_hash: live.current.hash }, 'serving');
    return {
      baseUrl,
      metricsUrl: metricsServer.url,
      dev,
      chainRpcUrl: pay.dev?.chain.rpc_url,
      icecastUrl: stream.available ? stream.publicUrl() : undefined,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
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
