import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { registerStreamingHost } from '../src/hosts/index.js';
import { listenerCapOf, liveHoldingSql, type HolderScope } from '../src/services/index.js';
import { migrate } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';

// What a purchase's capacity and buyer-limit checks read (migration 030): a kept counter per host, key and payer,
// less the services whose time is up. Compared here with a count of every service, made in JavaScript from the rows.
const migrations = fileURLToPath(new URL('../src/store/migrations/', import.meta.url));
const scopes: HolderScope[] = ['host', 'key', 'payer'];
const store = embeddedDatabase('audio-holdings-');

interface Counted {
  live_services: number;
  listener_places: number;
  next_expiry: string | null;
}

/** Every holder's live services as the rows say: a place held (status) and not expired (expires_at). */
async function countedByHand(): Promise<Map<string, Counted>> {
  const rows = await store.db.query<{
    host_id: string | null;
    api_key_id: string;
    payer: string;
    status: string;
    limits: Record<string, unknown>;
    expires_at: Date | null;
    now: Date;
  }>(
    'SELECT s.host_id, s.api_key_id, o.payer, s.status, s.limits, s.expires_at, now() AS now FROM services s JOIN orders o ON o.id = s.order_id',
  );
  const counted = new Map<string, Counted>();
  for (const row of rows) {
    for (const [scope, holder] of [
      ['host', row.host_id],
      ['key', row.api_key_id],
      ['payer', row.payer],
    ] as const) {
      if (!holder) continue;
      const entry = counted.get(`${scope} ${holder}`) ?? { live_services: 0, listener_places: 0, next_expiry: null };
      counted.set(`${scope} ${holder}`, entry);
      const live =
        ['pending', 'provisioning', 'active', 'suspended'].includes(row.status) &&
        (!row.expires_at || row.expires_at > row.now);
      if (!live) continue;
      entry.live_services += 1;
      entry.listener_places += listenerCapOf(row.limits);
      if (row.expires_at && (!entry.next_expiry || row.expires_at.toISOString() < entry.next_expiry))
        entry.next_expiry = row.expires_at.toISOString();
    }
  }
  return counted;
}

async function assertCountersMatch(when: string): Promise<void> {
  const expected = await countedByHand();
  assert.ok(expected.size > 0);
  for (const [name, counted] of expected) {
    const [scope, holder] = name.split(' ') as [HolderScope, string];
    const [read] = await store.db.query<{ live_services: number; listener_places: string; next_expiry: Date | null }>(
      liveHoldingSql(scope),
      [holder],
    );
    assert.deepEqual(
      {
        live_services: read.live_services,
        listener_places: Number(read.listener_places),
        next_expiry: read.next_expiry?.toISOString() ?? null,
      },
      counted,
      `${when}: ${name}`,
    );
  }
}

let orderCount = 0;
/** A paid order of `key` by `payer` (the columns a service needs), then its service. */
async function sell(
  client: { query(sql: string, params: unknown[]): Promise<unknown> },
  service: {
    key: string;
    payer: string;
    host: string | null;
    status?: string;
    limits: Record<string, unknown>;
    expiresIn: string | null;
  },
): Promise<string> {
  const id = `o${++orderCount}`;
  await client.query(
    `INSERT INTO orders (id, api_key_id, request_hash, product_id, billing, request, configuration, amount_atomic, network, asset, pay_to, payer, nonce, valid_before, payment, requirements, state)
             VALUES ($1, $2, 'h', 'instant-stream', 'one_time', '{}', '{}', 1, 'eip155:8453', '0xa', '0xb', $3, $1, 1, '{}', '{}', 'active')`,
    [id, service.key, service.payer],
  );
  await client.query(
    `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits, expires_at, host_id)
             VALUES ('svc_' || $1, $1, $2, 'instant-stream', $3, '/' || $1, 'source', 'pw', $4, now() + $5::interval, $6)`,
    [id, service.key, service.status ?? 'active', service.limits, service.expiresIn, service.host],
  );
  return `svc_${id}`;
}

describe('service holdings (migration 030)', () => {
  test('the counters start from what was live before the migration and follow every change', async () => {
    const files = (await readdir(migrations)).filter((f) => f.endsWith('.sql')).sort();
    await store.db.query(
      'CREATE TABLE schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    for (const file of files.filter((f) => f < '030')) {
      await store.db.query(await readFile(migrations + file, 'utf8'));
      await store.db.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
    }
    for (const key of ['key_a', 'key_b'])
      await store.db.query("INSERT INTO api_keys (id, name, secret_hash) VALUES ($1, $1, '\\x00')", [key]);
    // Sold before the migration: every status, the three ways a product names its listeners, no expiry, time up.
    const before = [
      { key: 'key_a', payer: '0xp1', host: 'host_1', limits: { max_listeners: 5 }, expiresIn: '1 hour' },
      { key: 'key_a', payer: '0xp2', host: 'host_1', limits: { listeners: 7 }, expiresIn: null },
      { key: 'key_b', payer: '0xp1', host: 'host_2', limits: { max_concurrent_listeners: 3 }, expiresIn: '2 hours' },
      {
        key: 'key_b',
        payer: '0xp2',
        host: 'host_1',
        status: 'suspended',
        limits: { max_listeners: 2 },
        expiresIn: '3 hours',
      },
      {
        key: 'key_a',
        payer: '0xp1',
        host: 'host_2',
        status: 'expired',
        limits: { max_listeners: 50 },
        expiresIn: '-1 hour',
      },
      {
        key: 'key_a',
        payer: '0xp2',
        host: 'host_1',
        status: 'failed',
        limits: { max_listeners: 40 },
        expiresIn: '1 hour',
      },
      { key: 'key_b', payer: '0xp1', host: 'host_1', limits: { max_listeners: 30 }, expiresIn: '-1 minute' },
      { key: 'key_b', payer: '0xp2', host: null, limits: { max_listeners: 1 }, expiresIn: '1 hour' },
    ];
    for (const service of before) await sell(store.db, service);
    // Later migrations (e.g. 040) follow it; this one must be the first applied here.
    assert.equal((await migrate(store.db))[0], '030_service_holdings.sql');
    await assertCountersMatch('right after the migration');

    const sold = await sell(store.db, {
      key: 'key_a',
      payer: '0xp3',
      host: 'host_2',
      limits: { max_listeners: 4 },
      expiresIn: '30 minutes',
    });
    await assertCountersMatch('a service sold');
    await store.db.query(`UPDATE services SET limits = '{"max_listeners": 9}', product_id = 'bigger' WHERE id = $1`, [
      sold,
    ]);
    await assertCountersMatch('an upgrade');
    await store.db.query("UPDATE services SET status = 'suspended' WHERE id = $1", [sold]);
    await store.db.query("UPDATE services SET status = 'active' WHERE id = $1", [sold]);
    await assertCountersMatch('suspended and resumed');
    await store.db.query("UPDATE services SET status = 'expired' WHERE status = 'active' AND expires_at <= now()");
    await assertCountersMatch('the life-cycle worker caught up with the time');
    await store.db.transaction(async (client) => {
      const twice = await sell(client, {
        key: 'key_b',
        payer: '0xp3',
        host: 'host_1',
        limits: { max_listeners: 6 },
        expiresIn: '1 hour',
      });
      await client.query(`UPDATE services SET limits = '{"max_listeners": 8}' WHERE id = $1`, [twice]);
      await client.query("UPDATE services SET status = 'suspended' WHERE id = $1", [twice]);
    });
    await assertCountersMatch('sold, upgraded and suspended in one transaction');
    await store.db
      .transaction(async (client) => {
        await sell(client, {
          key: 'key_b',
          payer: '0xp4',
          host: 'host_9',
          limits: { max_listeners: 100 },
          expiresIn: '1 hour',
        });
        await client.query("UPDATE services SET status = 'failed' WHERE id = $1", [sold]);
        throw new Error('rolled back');
      })
      .catch((e: Error) => assert.equal(e.message, 'rolled back'));
    await assertCountersMatch('a rolled back transaction');
    await store.db.query(
      "UPDATE services SET host_id = 'url:http://127.0.0.1:8001', icecast_url = 'http://127.0.0.1:8001' WHERE host_id = 'host_1'",
    );
    await registerStreamingHost(store.db, {
      id: 'host_3',
      publicUrl: 'http://127.0.0.1:8001',
      maxSources: 100,
      maxListeners: 5000,
    });
    await assertCountersMatch('services moved to another host');
    await store.db.query('DELETE FROM services WHERE id = $1', [sold]);
    await assertCountersMatch('a service deleted');
  });

  test("a holder's check reads a few services, however many are live", async () => {
    await store.db.query(
      "INSERT INTO api_keys (id, name, secret_hash) VALUES ('key_many', 'many', '\\x00') ON CONFLICT DO NOTHING",
    );
    await store.db.transaction(async (client) => {
      await client.query(`INSERT INTO orders (id, api_key_id, request_hash, product_id, billing, request, configuration, amount_atomic, network, asset, pay_to, payer, nonce, valid_before, payment, requirements, state)
                          SELECT 'om' || i, 'key_many', 'h', 'instant-stream', 'one_time', '{}', '{}', 1, 'eip155:8453', '0xa', '0xb', '0xmany', 'om' || i, 1, '{}', '{}', 'active'
                            FROM generate_series(1, 3000) i`);
      // 3,000 live services, and 2 whose time is up but whose status the life-cycle worker has not changed yet.
      await client.query(`INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits, expires_at, host_id)
                          SELECT 'svc_m' || i, 'om' || i, 'key_many', 'instant-stream', 'active', '/m' || i, 'source', 'pw', '{"max_listeners": 2}',
                                 now() + (CASE WHEN i <= 2 THEN -1 ELSE 1 END) * interval '1 hour', 'host_many'
                            FROM generate_series(1, 3000) i`);
    });
    const holders: Record<HolderScope, string> = { host: 'host_many', key: 'key_many', payer: '0xmany' };
    for (const scope of scopes) {
      const [held] = await store.db.query<{ live_services: number; listener_places: string }>(liveHoldingSql(scope), [
        holders[scope],
      ]);
      assert.deepEqual(
        { live: held.live_services, places: Number(held.listener_places) },
        { live: 2998, places: 5996 },
        scope,
      );
      const read = await servicesRowsRead(liveHoldingSql(scope), holders[scope]);
      assert.ok(read <= 4, `${scope}: the check read ${read} services`);
    }
    // The measure itself: counting the services one by one reads every one of them.
    const byHand = `SELECT count(*) FROM services s WHERE s.api_key_id = $1 AND s.status IN ('pending', 'provisioning', 'active', 'suspended') AND (s.expires_at IS NULL OR s.expires_at > now())`;
    assert.ok((await servicesRowsRead(byHand, 'key_many')) >= 2998);
  });
});

describe('services sold before AutoDJ was a limit (migration 074)', () => {
  test('a temporary-autodj service gets autodj: true; other products and an explicit flag are left alone', async () => {
    const sold = [
      ['svc_dj_old', 'temporary-autodj', { storage_mb: 5 }],
      ['svc_dj_new', 'temporary-autodj', { storage_mb: 5, autodj: true }],
      ['svc_ev_off', 'event-stream', { max_listeners: 3, autodj: false }],
      ['svc_plain', 'instant-stream', { max_listeners: 3 }],
    ] as const;
    for (const [id, product, limits] of sold) {
      await store.db.query(
        `INSERT INTO orders (id, api_key_id, request_hash, product_id, billing, request, configuration, amount_atomic, network, asset, pay_to, payer, nonce, valid_before, payment, requirements, state)
                 VALUES ($1, 'key_a', 'h', $2, 'one_time', '{}', '{}', 1, 'eip155:8453', '0xa', '0xb', '0xdj', $1, 1, '{}', '{}', 'active')`,
        [`o_${id}`, product],
      );
      await store.db.query(
        `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits, expires_at)
                 VALUES ($1, $2, 'key_a', $3, 'active', '/' || $1, 'source', 'pw', $4, now() + interval '1 hour')`,
        [id, `o_${id}`, product, limits],
      );
    }
    await store.db.query(await readFile(`${migrations}074_autodj_limit.sql`, 'utf8'));
    const rows = await store.db.query<{ id: string; limits: Record<string, unknown> }>(
      'SELECT id, limits FROM services WHERE id = ANY($1) ORDER BY id',
      [sold.map(([id]) => id)],
    );
    assert.deepEqual(Object.fromEntries(rows.map((row) => [row.id, row.limits])), {
      svc_dj_old: { storage_mb: 5, autodj: true },
      svc_dj_new: { storage_mb: 5, autodj: true },
      svc_ev_off: { max_listeners: 3, autodj: false },
      svc_plain: { max_listeners: 3 },
    });
  });
});

/** How many rows of `services` a query read, from its plan as run (EXPLAIN ANALYZE), with $1 bound to `holder`. */
async function servicesRowsRead(sql: string, holder: string): Promise<number> {
  const [
    {
      'QUERY PLAN': [plan],
    },
  ] = await store.db.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${sql.replaceAll('$1', `'${holder}'`)}`,
  );
  const walk = (node: PlanNode): number =>
    (node['Relation Name'] === 'services'
      ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
      : 0) + (node.Plans ?? []).reduce((sum, child) => sum + walk(child), 0);
  return walk(plan.Plan);
}

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Rows Removed by Filter'?: number;
  'Actual Loops': number;
  Plans?: PlanNode[];
}
