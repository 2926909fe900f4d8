import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { copyCatalog, request, startService, type Service } from './support/service.js';
import { connectDatabase } from './support/serve-lock.js';

// /availability on a pool of hosts says what an order sent now would meet: one host holds a whole stream, placement
// puts a new one on the host with the most free listener places, and the capacity reserve is checked on that host.
// An API instance places on hosts registered in PostgreSQL (rows here: nothing streams, nothing is paid); its
// development key and wallet have no paid history, so it orders as a newcomer.
let api: Service;
let db: pg.Client;
let catalog: Awaited<ReturnType<typeof copyCatalog>>;

before(async () => {
  catalog = await copyCatalog();
  const settings = join(catalog.catalogDir, 'catalog.yaml');
  const text = await readFile(settings, 'utf8');
  const halved = text.replace(/newcomer_share: [0-9.]+/, 'newcomer_share: 0.5');
  assert.notEqual(halved, text, 'the shipped catalog sets a newcomer share');
  await writeFile(settings, halved);
  api = await startService(
    { CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir, HOST_DOWN_AFTER_SECONDS: '3600' },
    { args: ['--role', 'api'] },
  );
  db = await connectDatabase(api);
  // Newcomers may fill half of each: 1 slot and 24 places of "wide", 5 slots and 20 places of "narrow".
  await db.query(
    `INSERT INTO streaming_hosts (id, public_url, max_sources, max_listeners, heartbeat_at, started_at)
     VALUES ('wide', 'http://wide.example:8000', 2, 48, now(), now()),
            ('narrow', 'http://narrow.example:8000', 10, 40, now(), now())`,
  );
});
after(async () => {
  await db?.end();
  await api?.stop();
  await catalog?.remove();
});

const instant = (listeners: number) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Pool Availability FM',
  parameters: { duration_hours: 1, max_listeners: listeners, bitrate_kbps: 64 },
});

let keys = 0;
/** What the first call of an order meets: 402 with an offer, or the refusal before payment. */
async function orderNow(listeners: number) {
  return request(api, 'POST', '/orders', {
    body: instant(listeners),
    headers: { 'idempotency-key': `pool-availability-${process.pid}-${keys++}` },
  });
}

async function availability(listeners: number) {
  const answer = await request(api, 'GET', `/availability?listeners=${listeners}`, { auth: false });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return {
    capacity: answer.body.capacity,
    instant: answer.body.products.find((p: any) => p.product_id === 'instant-stream'),
  };
}

test('/availability shows each host in placement order, the pool summed, and the newcomers part of each', async () => {
  const { capacity } = await availability(1);
  assert.deepEqual(capacity.stream_slots, { total: 12, free: 12 });
  assert.deepEqual(capacity.listener_places, { total: 88, free: 88 });
  assert.deepEqual(capacity.newcomers, {
    stream_slots: { total: 6, free: 6 },
    listener_places: { total: 44, free: 44 },
  });
  assert.deepEqual(capacity.hosts, [
    {
      stream_slots: { total: 2, free: 2 },
      listener_places: { total: 48, free: 48 },
      newcomers: { stream_slots: { total: 1, free: 1 }, listener_places: { total: 24, free: 24 } },
    },
    {
      stream_slots: { total: 10, free: 10 },
      listener_places: { total: 40, free: 40 },
      newcomers: { stream_slots: { total: 5, free: 5 }, listener_places: { total: 20, free: 20 } },
    },
  ]);
});

test('what /availability promises a newcomer is what an order gets: the host it is placed on decides', async () => {
  // 30 places: placed on "wide" (the most free places), where newcomers may fill 24. The pool's newcomers' part (44)
  // would take it, but no order goes to the pool as a whole.
  const thirty = await availability(30);
  assert.equal(thirty.instant.available_now, true);
  assert.equal(thirty.instant.newcomer_available_now, false);
  assert.match(thirty.instant.reason, /Only for established payers now/);
  const refused = await orderNow(30);
  assert.equal(refused.status, 503, JSON.stringify(refused.body));
  assert.equal(refused.body.error.code, 'capacity_reserved');

  const twenty = await availability(20);
  assert.equal(twenty.instant.newcomer_available_now, true);
  assert.equal((await orderNow(20)).status, 402, 'offered: within the newcomers part of "wide"');

  // More than any one host has free is not sold, although the pool has 88 places free.
  const fifty = await availability(50);
  assert.equal(fifty.instant.available_now, false);
  assert.match(
    fifty.instant.reason,
    /No streaming host has the 50 listener places asked free \(at most 48 on one host/,
  );
  const exhausted = await orderNow(50);
  assert.equal(exhausted.status, 503, JSON.stringify(exhausted.body));
  assert.equal(exhausted.body.error.code, 'capacity_exhausted');
});
