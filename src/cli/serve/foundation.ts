import type { AuditLog } from '../../audit/index.js';
import type { LiveSnapshot } from '../../catalog/live-snapshot.js';
import type { ChainChecks } from '../../payments/index.js';
import type { ApiKeys } from '../../keys/index.js';
import type { Logger } from '../../log/index.js';
import type { Metrics } from '../../observability/index.js';
import type { Database } from '../../store/index.js';
import type { Config } from '../config.js';
import type { HttpServer } from '../http-server.js';
import type { Payments } from '../payments.js';
import type { Shutdown } from '../shutdown.js';
import type { Streaming } from '../streaming.js';

/** What every part of the application is built from, once the HTTP server listens. */
export interface Foundation {
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

/** Whether this instance runs an Icecast: a host or both roles, with icecast2 installed. */
export function hosting({ config, stream }: Foundation): boolean {
  return config.role !== 'api' && stream.available;
}

/** Whether this instance sells streams: an API instance (on the pool's hosts), or both roles with an Icecast. */
export function sellsStreams(base: Foundation): boolean {
  return base.config.role === 'api' || (base.config.role === 'all' && hosting(base));
}
