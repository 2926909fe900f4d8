import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { callbackEndpoint, listenerCallback } from './support/icecast-callbacks.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { hostsCommand } from './support/hosts-command.js';
import { exitOf, listenWhenLive, startFfmpegSource, waitFor, within } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { startTcpPartition, type StartupParameters, type TcpPartition } from './support/tcp-partition.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// A streaming host whose PostgreSQL connections a network partition cut. When the partition ends, the
// connections that were waiting for an answer may stay open and silent (half-open): a pass waiting on one must give
// up (HOST_QUERY_TIMEOUT_MS) and the next one run, and what the host keeps in memory about its listener places must
// not outlive the notifications it may have missed. Host A sells and hosts; host C reaches PostgreSQL only through
// a TCP partition. Its full pass of listener places is set to an hour: memory is kept current by notifications only.
requireStreamingTools();

const pool = {
  HOST_DOWN_AFTER_SECONDS: '3',
  HOST_HEARTBEAT_MS: '500',
  LIFECYCLE_INTERVAL_MS: '250',
  ADMISSION_FULL_PASS_SECONDS: '3600',
  HOST_RECONCILE_INTERVAL_MS: '1000',
  // Instances that share a database share the key that seals webhook secrets.
  WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
};
/** How long a change may take to reach a host that lost nothing: a notification's latency. */
const NOTIFIED_WITHIN_MS = 3000;

let a: Service;
let b: Service;
let c: Service;
let originC: string;
let partition: TcpPartition;
let partitionB: TcpPartition;
let wallet: TestWallet;
let db: pg.Client;
let databaseUrl: string;
const cleanups: Array<() => unknown> = [];

before(async () => {
  a = await startService({ ...pool, STREAMING_HOST_ID: 'host-a' });
  cleanups.push(() => a.stop());
  const lock = await serveLock(a);
  const dev = await devFile(a);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  databaseUrl = lock.database_url;
  db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  cleanups.push(() => db.end());
  const database = new URL(lock.database_url);
  partition = await startTcpPartition({ host: database.hostname, port: Number(database.port) });
  cleanups.push(() => partition.close());
  const throughPartition = new URL(database);
  throughPartition.port = String(partition.port);
  c = await startService(
    {
      ...pool,
      DATABASE_URL: throughPartition.toString(),
      CHAIN_RPC_URL: dev.chain.rpc_url,
      DEV_FACILITATOR_ACCOUNT: '4',
      STREAMING_HOST_ID: 'host-c',
      HOST_QUERY_TIMEOUT_MS: '1000',
    },
    { args: ['--role', 'host'] },
  );
  cleanups.push(async () => {
    partition.heal();
    await c.stop();
  });
  const saved = JSON.parse(await readFile(join(c.dataDir, 'streaming-host.json'), 'utf8'));
  originC = `http://127.0.0.1:${saved.port}`;
  b = await startBothRoles(database, dev.chain.rpc_url);
});

/**
 * B runs both roles (API and host) and reaches PostgreSQL through a partition of its own; its sessions keep
 * synchronous_commit on whatever the server's default (see commitsAwaitingConfirmation). It is drained: nothing is
 * placed on it.
 */
async function startBothRoles(database: URL, chainRpcUrl: string): Promise<Service> {
  partitionB = await startTcpPartition({ host: database.hostname, port: Number(database.port) });
  cleanups.push(() => partitionB.close());
  const throughPartition = new URL(database);
  throughPartition.port = String(partitionB.port);
  throughPartition.searchParams.set('options', '-c synchronous_commit=on');
  const both = await startService({
    ...pool,
    DATABASE_URL: throughPartition.toString(),
    CHAIN_RPC_URL: chainRpcUrl,
    DEV_FACILITATOR_ACCOUNT: '5',
    STREAMING_HOST_ID: 'host-b',
    HOST_QUERY_TIMEOUT_MS: '1000',
  });
  cleanups.push(async () => {
    partitionB.heal();
    await both.stop();
  });
  assert.equal((await hostsCommand(a, ['hosts', 'drain', 'host-b'])).code, 0);
  return both;
}
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Buys a stream through A, placed on C (A is drained meanwhile). */
async function buyOnC(stationName: string) {
  assert.equal((await hostsCommand(a, ['hosts', 'drain', 'host-a'])).code, 0);
  const bought = await buy(a, wallet, {
    product_id: 'event-stream',
    email: 'agent@example.com',
    station_name: stationName,
    parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
  });
  assert.equal((await hostsCommand(a, ['hosts', 'undrain', 'host-a'])).code, 0);
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  assert.equal(new URL(bought.body.service.stream_url).origin, originC, 'placed on C');
  return bought.body.service as { service_id: string; stream_url: string; broadcast_url: string };
}

/**
 * Icecast's listener_add callback to an instance, as its Icecast makes it: true when admitted. C's queries give up
 * after 1 s (HOST_QUERY_TIMEOUT_MS), which a loaded machine can reach with no partition: a callback it could not
 * decide is asked again, as a player comes back.
 */
async function listenerAdmitted(on: Service, mount: string, client: number): Promise<boolean> {
  const endpoint = await callbackEndpoint(on.dataDir);
  const listener = { mount, client, ip: '198.51.100.9', agent: 'partition-test' };
  return listenerCallback(endpoint, 'listener_add', listener, 3);
}

let nextClient = 2_000_000;

// A host learns of a move by its notification: a callback it answers before that arrives is admitted (the reconciler,
// woken by the same commit, then cuts the mount); once it has arrived none is, and the new host admits.
test('a move notified to a host that lost nothing: refused there from then on, admitted on the new host', async () => {
  const s = await buyOnC('Moving FM');
  const mount = new URL(s.stream_url).pathname;
  assert.equal(await listenerAdmitted(c, mount, nextClient++), true, 'admitted on C while it is placed there');
  // What a move does to the row (src/hosts/service-moves.ts): another host, the next host epoch.
  await db.query("UPDATE services SET host_id = 'host-a', host_epoch = host_epoch + 1 WHERE id = $1", [s.service_id]);
  await waitFor(
    'C to refuse the service that moved',
    async () => !(await listenerAdmitted(c, mount, nextClient++)),
    NOTIFIED_WITHIN_MS,
  );
  for (let i = 0; i < 5; i++)
    assert.equal(await listenerAdmitted(c, mount, nextClient++), false, 'never admitted there again');
  assert.equal(await listenerAdmitted(a, mount, nextClient++), true, 'the new host admits');
});

/** C's lease as its metrics show it: a lost lease refuses every listener whatever memory holds. */
async function leaseOfC(): Promise<'held' | 'lost'> {
  const text = await (await fetch(c.metricsUrl)).text();
  return /^streaming_host_lease_held 1$/m.test(text) ? 'held' : 'lost';
}

/** When the usage of a service was last measured: the life-cycle worker measures on every pass. */
async function measuredAt(serviceId: string): Promise<number> {
  const read = await request(a, 'GET', `/services/${serviceId}/usage`);
  assert.equal(read.status, 200, JSON.stringify(read.body));
  return Date.parse(read.body.usage.measured_at);
}

/**
 * Holds every read of services until C's passes wait on it, then cuts the partition before their answers come back,
 * and ends it leaving those connections open and silent (as a partition that ends often does): what waited on them
 * never hears again.
 */
async function leaveSilentMidPass(): Promise<number> {
  await db.query('BEGIN');
  await db.query('LOCK TABLE services IN ACCESS EXCLUSIVE MODE');
  // Longer than the reconciler's interval (1 s): its pass and the life-cycle worker's wait on the lock.
  await sleep(1500);
  partition.cut();
  await db.query('ROLLBACK');
  await sleep(500);
  partition.heal({ keepSilent: true });
  return Date.now();
}

test('connections left silent mid-pass by a partition: the next passes run, the host reconciles again', async () => {
  const s = await buyOnC('Half Open FM');
  const encoder = startFfmpegSource(s.broadcast_url);
  cleanups.push(() => encoder.kill('SIGKILL'));
  const listener = await listenWhenLive(s.stream_url);
  cleanups.push(() => listener.close());

  const healedAt = await leaveSilentMidPass();
  // The life-cycle worker measures the stream again.
  const measured = async () => (await measuredAt(s.service_id)) > healedAt;
  await waitFor('a life-cycle pass after the partition', measured, 30_000);
  // The reconciler hears that the service stopped (on its next pass at the latest) and cuts its source and listener.
  const stopped = await request(a, 'POST', `/services/${s.service_id}/stop`, {
    headers: { 'idempotency-key': `stop-${s.service_id}` },
  });
  assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
  await within(listener.ended, 30_000, 'timed out waiting for C to cut the listener of the stopped service');
  assert.notEqual(await exitOf(encoder, 30_000), 0, 'the source of the stopped service is cut');
  // A service placed on C after the partition gets its mount: its source and a listener are let in.
  const next = await buyOnC('After The Partition FM');
  const nextEncoder = startFfmpegSource(next.broadcast_url);
  cleanups.push(() => nextEncoder.kill('SIGKILL'));
  const nextListener = await listenWhenLive(next.stream_url, 30_000);
  nextListener.close();
});

// Cut off past the bound, C loses its lease and the pool moves its stream to A; the notification of the move is
// sent into the partition. Once C writes its heartbeat again it answers for the services placed on it now, not for
// what memory held when the partition began.
test('a service moved while its host was cut off: refused there once it is back, admitted on the new one', async () => {
  const s = await buyOnC('Missed Move FM');
  const mount = new URL(s.stream_url).pathname;
  assert.equal(await listenerAdmitted(c, mount, nextClient++), true, 'admitted on C while it is placed there');

  partition.cut();
  await waitFor('C to lose its lease', async () => (await leaseOfC()) === 'lost', 30_000);
  await waitFor(
    'the service to move off C',
    async () => {
      const [row] = (await db.query('SELECT host_id FROM services WHERE id = $1', [s.service_id])).rows;
      return row.host_id === 'host-a';
    },
    30_000,
  );
  partition.heal({ keepSilent: true });
  await waitFor('C to hold its lease again (a heartbeat written)', async () => (await leaseOfC()) === 'held', 30_000);
  assert.equal(await listenerAdmitted(c, mount, nextClient++), false, 'C refuses the service that moved away');
  assert.equal(await listenerAdmitted(a, mount, nextClient++), true, 'A admits it');
});

/** Icecast's mount_add callback to an instance, as its Icecast makes it when a source connects: the answer's status. */
async function mountAdded(on: Service, mount: string): Promise<number> {
  const endpoint = await callbackEndpoint(on.dataDir);
  const answer = await fetch(`${endpoint.base}/mount_add`, {
    method: 'POST',
    headers: { authorization: endpoint.authorization, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ action: 'mount_add', mount, server: '127.0.0.1', port: '8000' }),
  });
  await answer.arrayBuffer();
  return answer.status;
}

/** C's sessions (of its main pool) that PostgreSQL has waiting for a lock on source_event_gates. */
async function waitingOnGatesForC(): Promise<number> {
  const { rows } = await db.query(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE application_name = 'agent-audio (host)' AND wait_event_type = 'Lock' AND query LIKE '%source_event_gates%'`,
  );
  return rows[0].n;
}

const mainPoolOfHost = (startup: StartupParameters) => startup.application_name === 'agent-audio (host)';

// A host-only process's queries outside its host pool (webhooks, source events, the host monitor,
// metrics) are bounded in time as the host pool's are, on a main pool of a few connections. Icecast's mount_add
// records a source event there: with source_event_gates locked, each callback gives up waiting, none hangs, and
// PostgreSQL ends each statement given up rather than keep its session waiting for the lock.
test('a host-only process bounds every query in time, on a main pool of at most 6 connections', async () => {
  const s = await buyOnC('Bounded FM');
  const mount = new URL(s.stream_url).pathname;
  const locker = new pg.Client({ connectionString: databaseUrl });
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE source_event_gates IN ACCESS EXCLUSIVE MODE');
  try {
    let answered = 0;
    const callbacks = Array.from({ length: 12 }, () => mountAdded(c, mount).finally(() => answered++));
    let mostConnections = 0;
    let waited = false;
    const allAnswered = async () => {
      mostConnections = Math.max(mostConnections, partition.connections(mainPoolOfHost));
      waited ||= (await waitingOnGatesForC()) > 0;
      return answered === callbacks.length;
    };
    await waitFor('every mount_add to be answered while the lock is held', allAnswered, 20_000);
    assert.deepEqual(await Promise.all(callbacks), Array(12).fill(200));
    assert.ok(waited, 'source events waited for the lock');
    assert.ok(mostConnections <= 6, `C's main pool had ${mostConnections} connections`);
    // At most the statement of the periodic flush of held source events (every second) is left waiting.
    const noneLeftWaiting = async () => (await waitingOnGatesForC()) <= 1;
    await waitFor('PostgreSQL to end the statements C gave up', noneLeftWaiting, 5000);
  } finally {
    await locker.query('ROLLBACK');
    await locker.end();
  }
});

let ownedOnC: Promise<{ service_id: string }> | undefined;
/** A service of A's key, bought once for the tests below (they read and write it through B). */
function ownedService(): Promise<{ service_id: string }> {
  return (ownedOnC ??= buyOnC('Read Anywhere FM'));
}

// With both roles in one process, the API's reads of now playing and media do not go through the host's
// pool (10 connections, taken by its passes and Icecast's callbacks, bounded as host work): cut off, it stops
// nothing the API does.
test('both roles in one process: the API reads now playing and files while its host pool is cut off', async () => {
  const s = await ownedService();
  const asOwner = { baseUrl: b.baseUrl, apiKey: a.apiKey };
  const hostWork = (startup: StartupParameters) => startup.application_name?.startsWith('agent-audio host') ?? false;
  const cut = partitionB.cut(hostWork);
  try {
    assert.ok(cut > 0, "B's host pool had connections to cut");
    const nowPlaying = await request(asOwner, 'GET', `/services/${s.service_id}/now-playing`);
    assert.equal(nowPlaying.status, 200, JSON.stringify(nowPlaying.body));
    const files = await request(asOwner, 'GET', `/services/${s.service_id}/files`);
    assert.equal(files.status, 200, JSON.stringify(files.body));
  } finally {
    partitionB.heal();
  }
});

/**
 * Sessions whose COMMIT has written its change and waits for a standby's confirmation, holding a lock on now_playing
 * (the rows it inserted): with synchronous_standby_names naming a standby that never comes, they wait for ever.
 */
async function commitsAwaitingConfirmation(): Promise<number> {
  const { rows } = await db.query(
    `SELECT count(DISTINCT a.pid)::int AS n FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
      WHERE a.wait_event = 'SyncRep' AND l.relation = 'now_playing'::regclass`,
  );
  return rows[0].n;
}

async function awaitStandby(standby: string | null): Promise<void> {
  if (standby) await db.query(`ALTER SYSTEM SET synchronous_standby_names = '${standby}'`);
  else await db.query('ALTER SYSTEM RESET synchronous_standby_names');
  // Only B's sessions (synchronous_commit on, set when they connected) wait for the standby.
  await db.query(standby ? "ALTER SYSTEM SET synchronous_commit = 'local'" : 'ALTER SYSTEM RESET synchronous_commit');
  await db.query('SELECT pg_reload_conf()');
  await waitFor('PostgreSQL to load its settings', async () => {
    const { rows } = await db.query('SHOW synchronous_standby_names');
    return rows[0].synchronous_standby_names === (standby ?? '');
  });
}

// A COMMIT whose answer never comes may have committed. The agent is told so, and told what to do.
test('a COMMIT whose answer is lost: the agent hears the change may have been saved, and it was', async () => {
  const s = await ownedService();
  const asOwner = { baseUrl: b.baseUrl, apiKey: a.apiKey };
  await awaitStandby('nobody');
  let answer: Awaited<ReturnType<typeof request>> | undefined;
  try {
    // A connection the previous test's partition reset may still sit in B's pool: a PUT that meets it fails before it
    // writes, and says nothing was changed. An agent retries it; so does this test, until a COMMIT waits.
    for (let attempt = 1; !answer; attempt++) {
      let settled = false;
      const put = request(asOwner, 'PUT', `/services/${s.service_id}/now-playing`, {
        body: { title: 'Unconfirmed Song' },
      }).finally(() => (settled = true));
      const waiting = async () => settled || (await commitsAwaitingConfirmation());
      await waitFor('the COMMIT to wait for its confirmation', waiting);
      if (settled && attempt < 3) {
        const early = await put;
        assert.match(String(early.body?.error?.message), /Nothing was changed/, JSON.stringify(early.body));
        continue;
      }
      partitionB.heal(); // its connection is reset: the answer to the COMMIT is lost
      answer = await put;
    }
  } finally {
    await awaitStandby(null);
  }
  assert.equal(answer.status, 503, JSON.stringify(answer.body));
  assert.equal(answer.body.error.code, 'store_unavailable');
  assert.equal(answer.body.error.retryable, true);
  assert.match(answer.body.error.message, /may or may not have been saved/);
  assert.match(answer.body.error.message, /same Idempotency-Key/);
  const saved = async () => {
    const read = await request(a, 'GET', `/services/${s.service_id}/now-playing`);
    return read.body.now_playing?.title === 'Unconfirmed Song';
  };
  await waitFor('the unconfirmed title to be read back: it was saved', saved);
});
