import { Database, migrate, startEmbeddedPostgres } from '../store/index.js';
import type { Config } from './config.js';
import { DataDirLock } from './data-dir-lock.js';

/**
 * The database for a CLI command: DATABASE_URL, else the embedded PostgreSQL of the serve running on DATA_DIR,
 * else the embedded PostgreSQL started just for this command.
 */
export async function openDatabase(config: Config): Promise<{ db: Database; close(): Promise<void> }> {
  const running = config.databaseUrl ? undefined : await DataDirLock.holder(config.dataDir);
  const url = config.databaseUrl ?? running?.database_url;
  if (url) {
    const db = new Database(url, { max: 4 });
    await migrate(db);
    return { db, close: () => db.close() };
  }
  const opened = await embeddedForCommand(config, { max: 4 });
  await migrate(opened.db).catch(async (e) => {
    await opened.close();
    throw e;
  });
  return opened;
}

/** The embedded PostgreSQL in DATA_DIR, started for one command under the DATA_DIR lock; close() stops it. */
export async function embeddedForCommand(
  config: Config,
  options: { max: number; name?: string },
): Promise<{ db: Database; close(): Promise<void> }> {
  const lock = await DataDirLock.acquire(config.dataDir);
  try {
    const pg = await startEmbeddedPostgres(config.dataDir);
    const db = new Database(pg.url, options);
    return {
      db,
      close: async () => {
        await db.close();
        await pg.stop();
        await lock.release();
      },
    };
  } catch (e) {
    await lock.release();
    throw e;
  }
}

/** Runs `work` on the CLI's database (openDatabase), closing it after. */
export async function withDatabase<T>(config: Config, work: (db: Database) => Promise<T>): Promise<T> {
  const { db, close } = await openDatabase(config);
  try {
    return await work(db);
  } finally {
    await close();
  }
}
