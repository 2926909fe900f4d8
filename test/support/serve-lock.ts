import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { DataDirLock, type LockInfo } from '../../src/cli/data-dir-lock.js';

/** What a started serve writes to DATA_DIR/serve.lock, with the database it runs on (its own or DATABASE_URL). */
export type ServeLock = LockInfo & { database_url: string };

/** The serve.lock of a running service (or of its data folder). */
export async function serveLock(from: { dataDir: string } | string): Promise<ServeLock> {
  const file = DataDirLock.path(typeof from === 'string' ? from : from.dataDir);
  const lock = JSON.parse(await readFile(file, 'utf8')) as LockInfo;
  if (!lock.database_url) throw new Error(`${file} names no database: the service has not finished starting`);
  return { ...lock, database_url: lock.database_url };
}

/** A connected PostgreSQL client on a running service's database; the caller ends it. */
export async function connectDatabase(from: { dataDir: string } | string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: (await serveLock(from)).database_url });
  await client.connect();
  return client;
}
