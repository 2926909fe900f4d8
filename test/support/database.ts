import { after, before } from 'node:test';
import { Database, startEmbeddedPostgres, type RunningPostgres } from '../../src/store/index.js';
import { scratchDir } from './service.js';

/** An embedded PostgreSQL of its own for the tests of one file: started before them, stopped after them. */
export function embeddedDatabase(prefix: string, options: { max?: number } = {}): { readonly db: Database } {
  const store = {} as { db: Database; pg?: RunningPostgres };
  before(async () => {
    store.pg = await startEmbeddedPostgres(await scratchDir(prefix));
    store.db = new Database(store.pg.url, options);
  });
  after(async () => {
    await store.db?.close();
    await store.pg?.stop();
  });
  return store;
}
