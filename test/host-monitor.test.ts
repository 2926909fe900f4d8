import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { beatStreamingHost, HostMonitor, HostReconciler } from '../src/hosts/index.js';
import type { LiveSnapshot } from '../src/catalog/live-snapshot.js';
import { inFlightByHost, OrderStore } from '../src/orders/index.js';
import { ListenerPlaces, type ServiceRow } from '../src/services/index.js';
import type { Logger } from '../src/log/index.js';
import { migrate } from '../src/store/index.js';
import { embeddedDatabase } from './support/database.js';
import { waitFor } from './support/streaming.js';

// The host monitor on a real PostgreSQL, without Icecast (test/host-loss.test.ts runs the whole path): which hosts
// are marked down, where their services go under the hosts' capacity, what stays when nothing has room.
const store = embeddedDatabase('audio-host-monitor-');
const quiet: Logger = { info() {}, warn() {}, error() {} };

async function addHost(
  id: string,
  fields: { state?: string; beatSecondsAgo: number; sources: number; listeners: number },
) {
  await store.db.query(
    `INSERT INTO streaming_hosts (id, public_url, state, max_sources, max_listeners, heartbeat_at, started_at)
     VALUES ($1, $2, $3, $4, $5, now() - make_interval(secs => $6), now() - interval '1 hour')`,
    [id, `http://${id}.example:8000`, fields.state ?? 'up', fields.sources, fields.listeners, fields.beatSecondsAgo],
  );
}

/** Services on `host` (50 listener places each) with their service_holdings, without orders or keys behind them. */
async function addServices(host: string, ids: string[], expires = "now() + interval '1 hour'", status = 'active') {
  await store.db.transaction(async (client) => {
    await client.query('SET LOCAL session_replication_role = replica');
    for (const id of ids)
      await client.query(
        `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password,
                               limits, expires_at, host_id)
         VALUES ($1, $1, 'key_1', 'event-stream', $3, '/' || $1, 'source', 'pw-' || $1, '{"max_listeners": 50}',
                 ${expires}, $2)`,
        [id, host, status],
      );
  });
  await recountHoldings();
}

async function recountHoldings() {
  await store.db.query('DELETE FROM service_holdings');
  await store.db.query(
    `INSERT INTO service_holdings (scope, holder, services, listener_places)
     SELECT 'host', host_id, count(*), sum(listener_places(limits)) FROM services
      WHERE status IN ('pending', 'provisioning', 'active', 'suspended') GROUP BY host_id`,
  );
}

const hostsOf = async () =>
  Object.fromEntries(
    (await store.db.query<{ id: string; host_id: string }>('SELECT id, host_id FROM services ORDER BY id')).map((r) => [
      r.id,
      r.host_id,
    ]),
  );

describe('host monitor', () => {
  test('a lost host is marked down; its services move to live hosts with room, credited; the rest wait', async () => {
    await migrate(store.db);
    await addHost('lost', { beatSecondsAgo: 60, sources: 10, listeners: 1000 });
    await addHost('big', { beatSecondsAgo: 0, sources: 3, listeners: 1000 });
    await addHost('small', { beatSecondsAgo: 0, sources: 2, listeners: 100 });
    await addHost('drained', { state: 'draining', beatSecondsAgo: 0, sources: 100, listeners: 5000 });
    await addHost('silent', { beatSecondsAgo: 3600, sources: 100, listeners: 5000 }); // down too: takes nothing
    await addServices('lost', ['s1', 's2', 's3', 's4', 's5', 's6']);
    await addServices('lost', ['ended'], "now() - interval '1 minute'");
    await addServices('lost', ['stopped'], "now() + interval '1 hour'", 'expired');
    const expiresBefore = new Map(
      (await store.db.query<{ id: string; expires_at: Date }>('SELECT id, expires_at FROM services')).map((r) => [
        r.id,
        r.expires_at.getTime(),
      ]),
    );
    const notified: string[] = [];
    const listening = await store.db.dedicated();
    listening.on('notification', (n) => notified.push(n.payload ?? ''));
    await listening.query('LISTEN host_services');

    const monitor = new HostMonitor(store.db, quiet, { downAfterSeconds: 2, intervalMs: 100 });
    const live = async () => {
      for (const id of ['big', 'small', 'drained']) await beatStreamingHost(store.db, id);
    };
    // The first passes only watch: a host is marked down once the monitor has reached PostgreSQL for the bound.
    const first = await monitor.pass();
    assert.deepEqual(first?.markedDown, []);
    const pass = await waitFor('a pass that marks the lost hosts down', async () => {
      await live();
      const p = await monitor.pass();
      return p?.markedDown.length ? p : undefined;
    });
    assert.deepEqual(pass.markedDown.sort(), ['lost', 'silent']);
    assert.equal(pass.moved.length, 5);
    assert.equal(pass.stranded, 1, 'six services, room for five');
    const placed = await hostsOf();
    const count = (host: string) => Object.values(placed).filter((h) => h === host).length;
    assert.equal(count('big'), 3, 'big: its 3 sources');
    assert.equal(count('small'), 2, 'small: 2 sources, 100 listener places');
    assert.equal(placed.ended, 'lost', 'an expired service is not moved');
    assert.equal(placed.stopped, 'lost');

    const moves = await store.db.query<{ service_id: string; credited_seconds: number; host_epoch: number }>(
      'SELECT service_id, credited_seconds, host_epoch FROM service_moves',
    );
    assert.equal(moves.length, 5);
    const services = await store.db.query<{ id: string; expires_at: Date; host_epoch: number }>(
      'SELECT id, expires_at, host_epoch FROM services',
    );
    for (const move of moves) {
      const service = services.find((s) => s.id === move.service_id)!;
      assert.ok(move.credited_seconds >= 60 && move.credited_seconds < 120, `credited ${move.credited_seconds} s`);
      assert.equal(service.expires_at.getTime() - expiresBefore.get(service.id)!, move.credited_seconds * 1000);
      assert.equal(service.host_epoch, 1);
      assert.equal(move.host_epoch, 1);
    }
    const events = await store.db.query<{ service_id: string; data: Record<string, unknown> }>(
      "SELECT service_id, data FROM events WHERE type = 'service.moved'",
    );
    assert.equal(events.length, 5);
    const s1 = events.find((e) => e.service_id === moves[0].service_id)!;
    const host = placed[moves[0].service_id];
    assert.equal(s1.data.stream_url, `http://${host}.example:8000/${moves[0].service_id}`);
    assert.equal(
      s1.data.broadcast_url,
      `icecast://source:pw-${moves[0].service_id}@${host}.example:8000/${moves[0].service_id}`,
    );
    await waitFor('the notifications', () => notified.length >= 10);
    // '<host id> <service id>' (migration 057): each host of a move is told which service moved.
    assert.deepEqual([...new Set(notified.map((payload) => payload.split(' ')[0]))].sort(), ['big', 'lost', 'small']);
    assert.ok(
      notified.every((payload) => /^\S+ \S+$/.test(payload)),
      notified.join(', '),
    );
    listening.release();

    // Room comes free on a live host: the next pass moves the one left.
    await store.db.query("UPDATE streaming_hosts SET max_sources = 4 WHERE id = 'big'");
    await live();
    const next = await monitor.pass();
    assert.equal(next?.moved.length, 1);
    assert.equal(next?.stranded, 0);
    assert.equal(Object.values(await hostsOf()).filter((h) => h === 'lost').length, 2, 'only the ended ones stay');
  });

  test('a down host that beats again is up, and keeps what had not moved yet', async () => {
    await addServices('silent', ['late']);
    await store.db.query(
      "UPDATE streaming_hosts SET max_sources = 4, max_listeners = 200 WHERE id IN ('big', 'small')",
    );
    await beatStreamingHost(store.db, 'silent');
    const [silent] = await store.db.query<{ state: string; down_since: Date | null }>(
      "SELECT state, down_since FROM streaming_hosts WHERE id = 'silent'",
    );
    assert.deepEqual(silent, { state: 'up', down_since: null });
    const monitor = new HostMonitor(store.db, quiet, { downAfterSeconds: 1, intervalMs: 100 });
    const pass = await monitor.pass();
    assert.equal(pass?.moved.length, 0);
    assert.equal((await hostsOf()).late, 'silent');
  });

  test('fencing: a host admits and keeps only what is placed on it, at the epoch its source was let in', async () => {
    await addHost('fenced', { beatSecondsAgo: 0, sources: 10, listeners: 1000 });
    await addServices('fenced', ['here1', 'here2']);
    await addServices('big', ['gone']);
    // Without its notification channel (not started) the host's admissions go to PostgreSQL: only its own services.
    const places = new ListenerPlaces(store.db, quiet, () => 'fenced');
    const session = { userAgent: 'test', protocol: 'icecast' } as const;
    assert.equal((await places.admit({ mount: '/gone' }, '1', '198.51.100.1', session)).accept, false);
    assert.equal((await places.admit({ mount: '/here1' }, '2', '198.51.100.1', session)).accept, true);
    await places.stop();

    const icecast = new Set(['/here1', '/here2', '/gone']);
    const synced: string[][] = [];
    let leaseHeld = true;
    const admittedAt = new Map([
      ['/here1', 0],
      ['/here2', 0],
    ]);
    const reconciler = new HostReconciler({
      db: store.db,
      hostId: 'fenced',
      workers: {
        admin: () => ({
          listMounts: async () => [...icecast].map((mount) => ({ mount })),
          killSource: async (mount: string) => icecast.delete(mount),
          listClients: async () => [],
          killClient: async () => true,
          updateMetadata: async () => true,
        }),
        autodj: { sync: async (services: ServiceRow[]) => void synced.push(services.map((s) => s.id)) },
        relays: { sync: async () => undefined },
        sourceEpoch: (mount) => admittedAt.get(mount),
        leaseHeld: () => leaseHeld,
      },
      log: quiet,
      intervalMs: 60_000,
    });
    await reconciler.pass();
    assert.deepEqual([...icecast].sort(), ['/here1', '/here2'], 'the mount of a service placed elsewhere is cut');
    // here1 moved away and back while its old source stayed connected: a new epoch, the old source goes.
    await store.db.query("UPDATE services SET host_epoch = host_epoch + 2 WHERE id = 'here1'");
    await reconciler.pass();
    assert.deepEqual([...icecast], ['/here2']);
    // The lease ran out: everything stops, without reading PostgreSQL.
    leaseHeld = false;
    await reconciler.pass();
    assert.deepEqual([...icecast], []);
    assert.deepEqual(synced.at(-1), [], 'no AutoDJ runs on a host without its lease');
    await reconciler.stop();
  });

  test('a move leaves the places of paid orders not provisioned yet on the host they were placed on', async () => {
    // What the earlier tests left takes no part: their services are over, their hosts take nothing new.
    await store.db.query("UPDATE services SET status = 'expired'");
    await store.db.query("UPDATE streaming_hosts SET state = 'draining' WHERE state = 'up'");
    await addHost('lost-again', { beatSecondsAgo: 60, sources: 10, listeners: 1000 });
    await addHost('target', { beatSecondsAgo: 0, sources: 2, listeners: 1000 });
    await addServices('lost-again', ['stranded']);
    await addServices('target', ['resident']);
    await addOrderInFlight('paid-1', 'target');
    // Products unknown to this catalog: an order's load is its configuration (max_listeners).
    const live = { current: { catalog: { byId: new Map() } } } as unknown as LiveSnapshot;
    const monitor = new HostMonitor(store.db, quiet, {
      downAfterSeconds: 2,
      intervalMs: 100,
      inFlight: inFlightByHost(new OrderStore(store.db), live),
    });
    const pass = await waitFor('a pass that marks the host down', async () => {
      await beatStreamingHost(store.db, 'target');
      const p = await monitor.pass();
      return p?.markedDown.includes('lost-again') ? p : undefined;
    });
    assert.deepEqual(pass.moved, [], "target's second slot is the paid order's");
    assert.equal(pass.stranded, 1);
    assert.equal((await hostsOf()).stranded, 'lost-again');

    // The payment failed: the slot is free, and the next pass moves the service into it.
    await store.db.query("UPDATE orders SET state = 'failed' WHERE id = 'paid-1'");
    await beatStreamingHost(store.db, 'target');
    const next = await monitor.pass();
    assert.equal(next?.moved.length, 1);
    assert.equal((await hostsOf()).stranded, 'target');
  });
});

/** A paid order placed on `host` whose service does not exist yet (50 listener places), without a key behind it. */
async function addOrderInFlight(id: string, host: string) {
  await store.db.transaction(async (client) => {
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query(
      `INSERT INTO orders (id, api_key_id, request_hash, product_id, billing, request, configuration, amount_atomic,
                           network, asset, pay_to, payer, nonce, valid_before, payment, requirements, state, host_id)
       VALUES ($1, 'key_1', 'hash', 'event-stream', 'one_time', '{}', '{"max_listeners": 50}', 1000, 'eip155:31337',
               '0x0', '0x0', '0x0', 'nonce-' || $1, 0, '{}', '{}', 'provisioning', $2)`,
      [id, host],
    );
  });
}
