import { ConnectionCap } from '../../http/index.js';
import { ApiKeys } from '../../keys/index.js';
import type { Logger } from '../../log/index.js';
import { Metrics } from '../../observability/index.js';
import { ChainChecks } from '../../payments/index.js';
import type { Config } from '../config.js';
import { DataDirLock } from '../data-dir-lock.js';
import { openHttpServer } from '../http-server.js';
import { BackgroundStop, type Shutdown } from '../shutdown.js';
import { streaming, type Streaming } from '../streaming.js';
import { startCatalog } from './catalog.js';
import type { Foundation } from './foundation.js';
import { operatorSigner, startPayments } from './payments.js';
import { startStore } from './store.js';

/**
 * What every role starts first, each step registering how it is undone: the DATA_DIR's lock, PostgreSQL and its
 * migrations, the catalog, API keys, payments, Icecast's supervisor and the HTTP server, listening.
 */
export async function startFoundation(config: Config, log: Logger, shutdown: Shutdown) {
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
  const connections = new ConnectionCap(config.http.connectionsPerIp, new Set(['127.0.0.1', ...config.trustedProxies]));
  const http = await openHttpServer(config, connections, shutdown);
  const metrics = new Metrics(store.db, { hostDownAfterSeconds: config.streaming.downAfterSeconds });
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
  return { base, signer, connections, lock, store };
}

/** Icecast, supervised; it starts once the HTTP server that answers its callbacks listens (startStreamingHost). */
function startStreaming(config: Config, log: Logger, shutdown: Shutdown, icecastStop: BackgroundStop): Streaming {
  const stream = streaming(config.dataDir, log, config.streaming);
  // Icecast takes over a second to stop by itself: it stops while the steps after it run.
  shutdown.push(icecastStop.starter(() => stream.stop()));
  return stream;
}
