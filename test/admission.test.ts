import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { callbackEndpoint, listenerCallback, type CallbackEndpoint } from './support/icecast-callbacks.js';
import { buy } from './support/purchase.js';
import { request, roomyCatalog, startService, type Service } from './support/service.js';
import { listenWhenLive, startFfmpegSource, waitFor, type Listener } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// Admission at the scale of a host: Icecast's listener callbacks are answered from memory kept
// current by PostgreSQL's notifications. The full pass that would also catch a change is set to an hour here, so
// every change below reaches the host by its notification or not at all. The callbacks are made as Icecast makes
// them, on mounts without a source (Icecast would then refuse the listener itself; the decision is what is tested),
// and the last test goes through Icecast and the front door with real sources.
requireStreamingTools();

/** How long a change may take to reach the host: a notification's latency, far below the hour of the full pass. */
const NOTIFIED_WITHIN_MS = 3000;

let service: Service;
let db: pg.Client;
let wallet: TestWallet;
let callbacks: CallbackEndpoint;
const encoders: ChildProcess[] = [];
const listeners: Listener[] = [];
let nextClient = 1_000_000;

before(async () => {
  // The life-cycle worker passes once at start only: an expiry is not turned into a status change behind the test.
  service = await startService({
    ...(await roomyCatalog()),
    ADMISSION_FULL_PASS_SECONDS: '3600',
    LIFECYCLE_INTERVAL_MS: '3600000',
  });
  const dev = await devFile(service.dataDir);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const lock = JSON.parse(await readFile(join(service.dataDir, 'serve.lock'), 'utf8'));
  db = new pg.Client({ connectionString: lock.database_url });
  await db.connect();
  callbacks = await callbackEndpoint(service.dataDir);
});
after(async () => {
  for (const l of listeners) l.close();
  for (const e of encoders) e.kill('SIGKILL');
  await db?.end();
  await service?.stop();
});

/** One callback as Icecast makes it; true when the answer admits. */
function callback(action: 'listener_add' | 'listener_remove', mount: string, client: number): Promise<boolean> {
  return listenerCallback(callbacks, action, { mount, client, ip: '198.51.100.7', agent: 'admission-test' });
}

/** A listener asks for a place and, if it got one, leaves at once: whether one was free now. */
async function probe(mount: string): Promise<boolean> {
  const client = nextClient++;
  const admitted = await callback('listener_add', mount, client);
  if (admitted) await callback('listener_remove', mount, client);
  return admitted;
}

async function bought(maxListeners: number): Promise<{ id: string; mount: string; stream: string; broadcast: string }> {
  const r = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'admission@example.com',
    station_name: 'Admission FM',
    parameters: { duration_hours: 1, max_listeners: maxListeners, bitrate_kbps: 64 },
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const s = r.body.service;
  return { id: s.service_id, mount: new URL(s.stream_url).pathname, stream: s.stream_url, broadcast: s.broadcast_url };
}

/** The next listener is refused as soon as the change has been notified: waits on that, bounded. */
function refusedSoon(mount: string, what: string): Promise<true> {
  return waitFor(
    `the next listener refused after ${what}`,
    async () => !(await probe(mount)) || undefined,
    NOTIFIED_WITHIN_MS,
  );
}

/** Status codes of listeners opened all at once (one socket each), in the order asked. */
function openAtOnce(urls: string[]): Promise<Array<{ status: number; close(): void }>> {
  return Promise.all(
    urls.map(
      (url) =>
        new Promise<{ status: number; close(): void }>((resolve) => {
          const req = http.get(url, { agent: false }, (res) =>
            resolve({ status: res.statusCode ?? 0, close: () => req.destroy() }),
          );
          req.on('error', () => resolve({ status: 0, close: () => undefined }));
        }),
    ),
  );
}

describe('admission from memory', () => {
  test('a stop through the API refuses the next listener at once', async () => {
    const s = await bought(5);
    assert.equal(await probe(s.mount), true, 'a listener is admitted while the service runs');
    const stopped = await request(service, 'POST', `/services/${s.id}/stop`, {
      headers: { 'idempotency-key': `stop-${s.id}` },
    });
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    await refusedSoon(s.mount, 'the stop');
  });

  test('a lower listener cap refuses the next listener, a higher one admits it again', async () => {
    const s = await bought(3);
    const held = [nextClient++, nextClient++];
    for (const client of held) assert.equal(await callback('listener_add', s.mount, client), true);
    assert.equal(await probe(s.mount), true, 'the third place is free');
    await db.query(`UPDATE services SET limits = limits || '{"max_listeners": 2}' WHERE id = $1`, [s.id]);
    await refusedSoon(s.mount, 'the cap went down to the 2 places taken');
    await db.query(`UPDATE services SET limits = limits || '{"max_listeners": 3}' WHERE id = $1`, [s.id]);
    await waitFor('a listener admitted again', async () => (await probe(s.mount)) || undefined, NOTIFIED_WITHIN_MS);
    for (const client of held) await callback('listener_remove', s.mount, client);
  });

  test('a move to another host refuses the next listener here; the move back admits again', async () => {
    const s = await bought(5);
    assert.equal(await probe(s.mount), true);
    const [{ host_id: here }] = (await db.query('SELECT host_id FROM services WHERE id = $1', [s.id])).rows;
    await db.query("UPDATE services SET host_id = 'host_elsewhere' WHERE id = $1", [s.id]);
    await refusedSoon(s.mount, 'the move');
    await db.query('UPDATE services SET host_id = $2 WHERE id = $1', [s.id, here]);
    await waitFor(
      'a listener admitted after the move back',
      async () => (await probe(s.mount)) || undefined,
      NOTIFIED_WITHIN_MS,
    );
  });

  test('an expiry is read on the clock at each callback: refused the moment it passes', async () => {
    const s = await bought(5);
    const {
      rows: [{ expires_at: expiresAt }],
    } = await db.query(
      "UPDATE services SET expires_at = now() + interval '2 seconds' WHERE id = $1 RETURNING expires_at",
      [s.id],
    );
    await waitFor('the new expiry to be known', async () => (await probe(s.mount)) || undefined, NOTIFIED_WITHIN_MS);
    await waitFor('the expiry to pass', async () => Date.now() > (expiresAt as Date).getTime() || undefined, 5000);
    assert.equal(await probe(s.mount), false, 'refused right after expires_at, before any worker pass changed the row');
  });

  test('concurrent callbacks for the last places: exactly as many admitted as there are places', async () => {
    const s = await bought(4);
    const first = nextClient++;
    assert.equal(await callback('listener_add', s.mount, first), true);
    const clients = Array.from({ length: 12 }, () => nextClient++);
    const answers = await Promise.all(clients.map((c) => callback('listener_add', s.mount, c)));
    assert.equal(answers.filter(Boolean).length, 3, 'the 3 places left, no more');
    const lastTwo = await Promise.all([nextClient++, nextClient++].map((c) => callback('listener_add', s.mount, c)));
    assert.deepEqual(lastTwo, [false, false]);
    // One leaves: of two asking for its place together, one gets it.
    const leaving = clients[answers.indexOf(true)];
    await callback('listener_remove', s.mount, leaving);
    const race = await Promise.all([nextClient++, nextClient++].map((c) => callback('listener_add', s.mount, c)));
    assert.equal(race.filter(Boolean).length, 1);
  });

  test('the places taken in memory reach the listeners table', async () => {
    const s = await bought(5);
    const client = nextClient++;
    assert.equal(await callback('listener_add', s.mount, client), true);
    await waitFor(
      'the listener row and its session',
      async () => {
        const { rows } = await db.query(
          `SELECT l.ip, ls.client_network FROM listeners l
           JOIN listener_sessions ls ON ls.service_id = l.service_id AND ls.client_id = l.client_id
           WHERE l.service_id = $1 AND l.client_id = $2 AND ls.ended_at IS NULL`,
          [s.id, String(client)],
        );
        return rows[0];
      },
      5000,
    );
    await callback('listener_remove', s.mount, client);
    await waitFor(
      'the row gone and the session closed',
      async () =>
        (await db.query('SELECT 1 FROM listeners WHERE service_id = $1', [s.id])).rowCount === 0 &&
        (await db.query('SELECT 1 FROM listener_sessions WHERE service_id = $1 AND ended_at IS NULL', [s.id]))
          .rowCount === 0
          ? true
          : undefined,
      5000,
    );
  });

  test('through Icecast: a burst past its queues all admitted, over the cap refused; a blip too', async () => {
    // 3 streams × 50 places, 150 listeners at once: more than Icecast's 100 waiting for auth and its backlog of 5.
    const streams = await Promise.all([0, 1, 2].map(() => bought(50)));
    for (const s of streams) encoders.push(startFfmpegSource(s.broadcast));
    for (const s of streams) listeners.push(await listenWhenLive(s.stream));
    // Each stream has one listener (the probe above) and 49 places left.
    const urls = streams.flatMap((s) => Array.from({ length: 49 }, () => s.stream));
    const answers = await openAtOnce(urls);
    listeners.push(...answers.map((a) => ({ close: a.close }) as Listener));
    const statuses = answers.map((a) => a.status);
    assert.equal(statuses.filter((c) => c === 200).length, urls.length, `answers: ${JSON.stringify(tally(statuses))}`);
    // Every stream is full now: the next listener of each, and of two at once, is refused.
    const over = await openAtOnce(streams.flatMap((s) => [s.stream, s.stream]));
    listeners.push(...over.map((a) => ({ close: a.close }) as Listener));
    assert.deepEqual(tally(over.map((a) => a.status)), { 401: 6 });
    // A blip: all of them drop and come back at once. Icecast queues their listener_remove callbacks with the new
    // listeners' admissions (over 100 waiting: it answers "busy"); the front door has them wait, not refused.
    for (const a of [...answers, ...over]) a.close();
    const back = await openAtOnce(urls);
    listeners.push(...back.map((a) => ({ close: a.close }) as Listener));
    assert.equal(
      back.filter((a) => a.status === 200).length,
      urls.length,
      `answers: ${JSON.stringify(tally(back.map((a) => a.status)))}`,
    );
  });
});

function tally(statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}
