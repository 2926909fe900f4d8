import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { registerStreamingHost } from '../src/hosts/index.js';
import { migrate } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';

// Migration 009 on a database that already has services sold by address: they keep their address as a host of their
// own, and the instance now at that address adopts them.
const migrations = fileURLToPath(new URL('../src/store/migrations/', import.meta.url));
const store = embeddedDatabase('audio-hosts-');

describe('streaming hosts', () => {
  test('services from before host ids keep their address, and are adopted by the host at that address', async () => {
    // The schema as it was before 009, with the bookkeeping migrate() keeps.
    await store.db.query(
      'CREATE TABLE schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    for (const file of (await readdir(migrations)).filter((f) => f.endsWith('.sql') && f < '009').sort()) {
      await store.db.query(await readFile(migrations + file, 'utf8'));
      await store.db.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
    }
    await store.db.transaction(async (client) => {
      await client.query('SET LOCAL session_replication_role = replica'); // no orders or keys needed for these rows
      for (const [id, url] of [
        ['svc_a', 'http://127.0.0.1:8001'],
        ['svc_b', 'http://127.0.0.1:8001'],
        ['svc_c', 'http://127.0.0.1:8002'],
      ]) {
        await client.query(
          `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits, icecast_url)
           VALUES ($1, $1, 'key', 'instant-stream', 'active', '/' || $1, 'source', 'pw', '{}', $2)`,
          [id, url],
        );
      }
    });
    assert.ok((await migrate(store.db)).some((f) => f.startsWith('009_')));

    const hosts = await store.db.query<{ id: string; public_url: string }>(
      'SELECT id, public_url FROM streaming_hosts ORDER BY id',
    );
    assert.deepEqual(hosts, [
      { id: 'url:http://127.0.0.1:8001', public_url: 'http://127.0.0.1:8001' },
      { id: 'url:http://127.0.0.1:8002', public_url: 'http://127.0.0.1:8002' },
    ]);
    const hostOf = async () =>
      Object.fromEntries(
        (await store.db.query<{ id: string; host_id: string }>('SELECT id, host_id FROM services ORDER BY id')).map(
          (r) => [r.id, r.host_id],
        ),
      );
    assert.deepEqual(await hostOf(), {
      svc_a: 'url:http://127.0.0.1:8001',
      svc_b: 'url:http://127.0.0.1:8001',
      svc_c: 'url:http://127.0.0.1:8002',
    });

    await registerStreamingHost(store.db, {
      id: 'host_one',
      publicUrl: 'http://127.0.0.1:8001',
      maxSources: 100,
      maxListeners: 5000,
    });
    assert.deepEqual(await hostOf(), { svc_a: 'host_one', svc_b: 'host_one', svc_c: 'url:http://127.0.0.1:8002' });
    await registerStreamingHost(store.db, {
      id: 'host_one',
      publicUrl: 'http://127.0.0.1:9001',
      maxSources: 100,
      maxListeners: 5000,
    });
    assert.deepEqual(
      await store.db.query('SELECT public_url FROM streaming_hosts WHERE id = $1', ['host_one']),
      [{ public_url: 'http://127.0.0.1:9001' }],
      'the host moved',
    );
  });
});
