import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, readdir, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Database, migrate, startEmbeddedPostgres } from '../src/store/index.js';
import { builtOnce, UNUSED_BUILD_MS } from './support/build-once.js';
import { scratchDir } from './support/service.js';
import { requireStreamingTools } from './support/system-tools.js';
import { copyTemplateCluster } from './support/template-data-dir.js';

// The suite's own machinery: what makes it fast must not make it say less.
describe('test support', () => {
  test('a missing system program fails with the command that installs it, it does not skip', () => {
    assert.throws(
      () => requireStreamingTools(['icecast2', 'no-such-program-here']),
      (e: Error) => {
        const install = 'run `sh scripts/install-system-deps.sh`';
        assert.equal(e.message, `no-such-program-here is not installed; these tests need them: ${install}`);
        return true;
      },
    );
    assert.doesNotThrow(() => requireStreamingTools(['sh']));
  });

  test('a migrated template cluster is what a first start makes: every migration applied, none left', async () => {
    const dataDir = await scratchDir('audio-template-');
    await copyTemplateCluster(dataDir, 'migrated');
    assert.ok(existsSync(join(dataDir, 'pg', 'PG_VERSION')) && existsSync(join(dataDir, 'pg-credentials.json')));
    assert.ok(!existsSync(join(dataDir, 'pg', 'postmaster.pid')), 'stopped cleanly before it was copied');
    const pg = await startEmbeddedPostgres(dataDir);
    const db = new Database(pg.url);
    try {
      assert.deepEqual(await migrate(db), []);
      const applied = await db.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
      const migrations = await readdir(new URL('../src/store/migrations/', import.meta.url));
      assert.deepEqual(
        applied.map((r) => r.name),
        migrations.filter((f) => f.endsWith('.sql')).sort(),
      );
    } finally {
      await db.close();
      await pg.stop();
    }
  });

  test('a bare template cluster has no migration applied', async () => {
    const dataDir = await scratchDir('audio-template-');
    await copyTemplateCluster(dataDir, 'bare');
    const pg = await startEmbeddedPostgres(dataDir);
    const db = new Database(pg.url);
    try {
      assert.deepEqual(await db.query("SELECT 1 FROM pg_tables WHERE schemaname = 'public'"), []);
    } finally {
      await db.close();
      await pg.stop();
    }
  });
  test('building a new version removes the versions no test process has used for a day, and only those', async () => {
    const parent = await scratchDir('audio-builds-');
    const version = (hex: string) => join(parent, `thing-${hex.repeat(16)}`);
    const readyAt = async (dir: string, msAgo: number) => {
      await mkdir(dir);
      await writeFile(join(dir, 'ready'), '');
      const at = new Date(Date.now() - msAgo);
      await utimes(join(dir, 'ready'), at, at);
    };
    await readyAt(version('a'), UNUSED_BUILD_MS + 60_000);
    await readyAt(version('b'), UNUSED_BUILD_MS - 60_000);
    await readyAt(version('c'), UNUSED_BUILD_MS + 60_000);
    await mkdir(join(parent, 'other-aaaaaaaaaaaaaaaa'));
    // Asking for c (already built) marks it used.
    await builtOnce(version('c'), () => assert.fail('c is built already'));
    assert.ok(Date.now() - (await stat(join(version('c'), 'ready'))).mtimeMs < 60_000);

    await builtOnce(version('d'), (into) => writeFile(join(into, 'made'), 'd'));
    assert.ok(existsSync(join(version('d'), 'made')));
    assert.deepEqual((await readdir(parent)).sort(), [
      'other-aaaaaaaaaaaaaaaa',
      `thing-${'b'.repeat(16)}`,
      `thing-${'c'.repeat(16)}`,
      `thing-${'d'.repeat(16)}`,
    ]);
  });
});
