import type { Logger } from '../../log/index.js';
import { Database, migrate, startEmbeddedPostgres, type RunningPostgres } from '../../store/index.js';
import type { Config } from '../config.js';
import type { Shutdown } from '../shutdown.js';

/** The embedded PostgreSQL (unless DATABASE_URL names one), connected and migrated. */
export async function startStore(config: Config, log: Logger, shutdown: Shutdown) {
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
    `the PostgreSQL of DATABASE_URL (${where}) could not be used: ${reason}. ` +
      "Check that it runs, accepts connections from this host and that the URL's user and password are right",
  );
}
