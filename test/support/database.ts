import { after, before } from 'node:test';
import { Database, startEmbeddedPostgres, type RunningPostgres } from '../../src/store/index.js';
import { scratchDir } from './service.js';
import { copyTemplateCluster } from './template-data-dir.js';

/**
 * An embedded PostgreSQL of its own for the tests of one file, started before them on a copy of the bare template
 * cluster (as initdb leaves it: no migration applied), stopped after them.
 */
export function embeddedDatabase(prefix: string, options: { max?: number } = {}): { readonly db: Database } {
  const store = {} as { db: Database; pg?: RunningPostgres };
  before(async () => {
    const dataDir = await scratchDir(prefix);
    await copyTemplateCluster(dataDir, 'bare');
    store.pg = await startEmbeddedPostgres(dataDir);
    store.db = new Database(store.pg.url, options);
  });
  after(async () => {
    await store.db?.close();
    await store.pg?.stop();
  });
  return store;
}
