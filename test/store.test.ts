import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ApiError } from '../src/errors/index.js';
import { Database } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';

const store = embeddedDatabase('audio-store-', { max: 1 });

describe('Database', () => {
  test('a prepared statement whose table another instance changed is run again unprepared', async () => {
    await store.db.query('CREATE TABLE widgets (id int PRIMARY KEY, name text)');
    await store.db.query("INSERT INTO widgets VALUES (1, 'one')");
    const read = () =>
      store.db.query<{ id: number; name: string; colour?: string }>('SELECT * FROM widgets WHERE id = $1', [1]);
    assert.deepEqual(await read(), [{ id: 1, name: 'one' }]);
    // What a migration run by another instance does: the prepared plan's result type no longer holds (0A000).
    const other = new Database(store.db.url);
    await other.query("ALTER TABLE widgets ADD COLUMN colour text NOT NULL DEFAULT 'red'");
    await other.close();
    assert.deepEqual(await read(), [{ id: 1, name: 'one', colour: 'red' }]);
    assert.deepEqual(await read(), [{ id: 1, name: 'one', colour: 'red' }], 'prepared afresh');
  });

  test('the same statement gives the same answers prepared as the first time', async () => {
    for (let i = 0; i < 3; i++)
      assert.deepEqual(await store.db.query<{ n: string }>('SELECT $1::text AS n', [String(i)]), [{ n: String(i) }]);
    await assert.rejects(store.db.query('SELECT 1/$1::int AS n', [0]), /division by zero/);
  });

  test("a transaction's statements are prepared once, and afresh after another instance changed their table", async () => {
    await store.db.query('CREATE TABLE gadgets (id int PRIMARY KEY, name text)');
    await store.db.query("INSERT INTO gadgets VALUES (1, 'one')");
    const sql = 'SELECT * FROM gadgets WHERE id = $1';
    const read = () => store.db.transaction(async (client) => (await client.query(sql, [1])).rows);
    assert.deepEqual(await read(), [{ id: 1, name: 'one' }]);
    const prepared = await store.db.transaction(
      async (client) =>
        (await client.query('SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement = $1', [sql]))
          .rows[0].n,
    );
    assert.equal(prepared, 1, 'prepared on the (only) connection, under a name');
    const other = new Database(store.db.url);
    await other.query('ALTER TABLE gadgets ADD COLUMN colour text');
    await other.close();
    // The stale plan fails its transaction (which changed nothing); the next one prepares the statement again.
    await assert.rejects(read(), (e: { status?: number; retryable?: boolean }) => e.status === 503 && !!e.retryable);
    assert.deepEqual(await read(), [{ id: 1, name: 'one', colour: null }]);
  });

  // A change whose answer is lost may have been saved; the caller must not hear that nothing changed.
  test('a change run on its own whose answer is lost: "may or may not have been saved", and it was', async () => {
    await store.db.query('CREATE TABLE ledger (id int PRIMARY KEY)');
    const waitsForStandby = new URL(store.db.url);
    waitsForStandby.searchParams.set('options', '-c synchronous_commit=on');
    const patient = new Database(waitsForStandby.toString(), { timeoutMs: 1_000 });
    await standby('nobody'); // its commits write, then wait for a standby that never comes
    try {
      await assert.rejects(patient.query('INSERT INTO ledger VALUES ($1)', [1]), (e: ApiError) => {
        assert.equal(e.code, 'store_unavailable');
        assert.match(e.message, /may or may not have been saved/);
        return true;
      });
      await assert.rejects(patient.query('SELECT pg_sleep(5)'), /Nothing was changed/, 'a read changed nothing');
    } finally {
      await standby(null);
      await patient.close();
    }
    const saved = async () => (await store.db.query('SELECT id FROM ledger')).length === 1;
    for (const deadline = Date.now() + 10_000; !(await saved()); ) {
      assert.ok(Date.now() < deadline, 'the change was saved');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
});

/** Names a synchronous standby for the sessions that ask for one (synchronous_commit=on), or none. */
async function standby(name: string | null): Promise<void> {
  if (name) await store.db.query(`ALTER SYSTEM SET synchronous_standby_names = '${name}'`);
  else await store.db.query('ALTER SYSTEM RESET synchronous_standby_names');
  await store.db.query(
    name ? "ALTER SYSTEM SET synchronous_commit = 'local'" : 'ALTER SYSTEM RESET synchronous_commit',
  );
  await store.db.query('SELECT pg_reload_conf()');
  for (const deadline = Date.now() + 10_000; ; ) {
    const [row] = await store.db.query<{ names: string }>('SELECT current_setting($1) AS names', [
      'synchronous_standby_names',
    ]);
    if (row.names === (name ?? '')) return;
    assert.ok(Date.now() < deadline, 'PostgreSQL loaded its settings');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
