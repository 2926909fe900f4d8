import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Database, startEmbeddedPostgres, type RunningPostgres } from '../src/store/index.js';
import { scratchDir } from './support/service.js';

let pg: RunningPostgres;
let db: Database;

before(async () => {
  pg = await startEmbeddedPostgres(await scratchDir('audio-store-'));
  db = new Database(pg.url, { max: 1 });
});
after(async () => {
  await db?.close();
  await pg?.stop();
});

describe('Database', () => {
  test('a prepared statement whose table another instance changed is run again unprepared', async () => {
    await db.query('CREATE TABLE widgets (id int PRIMARY KEY, name text)');
    await db.query("INSERT INTO widgets VALUES (1, 'one')");
    const read = () => db.query<{ id: number; name: string; colour?: string }>('SELECT * FROM widgets WHERE id = $1', [1]);
    assert.deepEqual(await read(), [{ id: 1, name: 'one' }]);
    // What a migration run by another instance does: the prepared plan's result type no longer holds (0A000).
    const other = new Database(pg.url);
    await other.query("ALTER TABLE widgets ADD COLUMN colour text NOT NULL DEFAULT 'red'");
    await other.close();
    assert.deepEqual(await read(), [{ id: 1, name: 'one', colour: 'red' }]);
    assert.deepEqual(await read(), [{ id: 1, name: 'one', colour: 'red' }], 'prepared afresh');
  });

  test('the same statement gives the same answers prepared as the first time', async () => {
    for (let i = 0; i < 3; i++) assert.deepEqual(await db.query<{ n: string }>('SELECT $1::text AS n', [String(i)]), [{ n: String(i) }]);
    await assert.rejects(db.query('SELECT 1/$1::int AS n', [0]), /division by zero/);
  });
});
