import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
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
});
