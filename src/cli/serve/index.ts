import { healthDetails } from '../../http/index.js';
import type { Logger } from '../../log/index.js';
import { startMetricsServer } from '../../observability/index.js';
import { armCrashPoints } from '../../orders/index.js';
import { treatAsPublic } from '../../ssrf/index.js';
import type { Config } from '../config.js';
import { refuseWhatLosesMoney, warnPreflight } from '../preflight.js';
import { Shutdown } from '../shutdown.js';
import { missingProxy } from '../streaming-proxy.js';
import { serviceVersion } from '../version.js';
import { startApiWorkers } from './api-role.js';
import { startApplication } from './application.js';
import { writeDevFile } from './dev-file.js';
import { hosting } from './foundation.js';
import { watchHostPool } from './host-pool-watch.js';
import { startStreamingHost } from './host-role.js';
import { startFoundation } from './start-foundation.js';

export interface RunningService {
  baseUrl: string;
  metricsUrl: string;
  /** Development: dev.json and the agent API key written to it. */
  dev?: { file: string; apiKey: string };
  chainRpcUrl?: string;
  icecastUrl?: string;
  /** A host-only instance (`--role host`): the streaming host it runs; it serves no API at baseUrl. */
  streamingHost?: { id: string };
  stop(): Promise<void>;
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
    const noProxy = config.role === 'api' ? undefined : missingProxy(config.streaming);
    if (noProxy) throw new Error(noProxy);
    armCrashPoints({ crashAt: config.testHooks.orderCrashAt, pauseAt: config.testHooks.orderPauseAt });
    treatAsPublic(config.testHooks.ssrfPublicAddresses);
    const { base, signer, connections, lock, store } = await startFoundation(config, log, shutdown);
    const { live, keys, pay, stream, http } = base;
    const app = await startApplication(base, signer, connections);
    const metricsServer = await startMetricsServer(base.metrics.registry, config.metricsHost, config.metricsPort, () =>
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
    if (config.role !== 'api') await startStreamingHost(base, app, app.decider);
    watchHostPool(base);
    await lock.update({ base_url: http.baseUrl, ...(store.pg && { database_url: store.databaseUrl }) });
    const dev = config.production
      ? undefined
      : await writeDevFile(config, keys, { base_url: http.baseUrl, ...pay.dev });
    log.info({ base_url: http.baseUrl, metrics_url: metricsServer.url, content_hash: live.current.hash }, 'serving');
    if (config.production) shutdown.push(warnPreflight(config, log, store.db));
    return {
      baseUrl: http.baseUrl,
      metricsUrl: metricsServer.url,
      dev,
      chainRpcUrl: pay.dev?.chain.rpc_url,
      icecastUrl: hosting(base) ? stream.publicUrl() : undefined,
      ...(config.role === 'host' && { streamingHost: { id: stream.hostId() } }),
      stop: () => shutdown.run(),
    };
  } catch (e) {
    await shutdown.run();
    throw e;
  }
}
