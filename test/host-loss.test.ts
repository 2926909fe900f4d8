import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { hostsCommand } from './support/hosts-command.js';
import { openSse } from './support/sse.js';
import {
  assertListenerRefused,
  assertSourceRefused,
  exitOf,
  hasMpegFrame,
  listenWhenLive,
  startFfmpegSource,
  waitFor,
  within,
} from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { startTcpPartition } from './support/tcp-partition.js';
import { TestWallet } from './support/wallet.js';
import { startReceiver } from './support/webhook-receiver.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// Losing a host: two instances on one PostgreSQL and chain, each the streaming host of its own Icecast.
// The host of a live stream is killed; the stream moves to the other host within the bound, its owner is told the
// new addresses, and the lost host, started again, does not take the stream back. Then a third host, reaching
// PostgreSQL through a TCP partition, is cut off from it.
requireStreamingTools();

const DOWN_AFTER_SECONDS = 3;
const pool = {
  HOST_DOWN_AFTER_SECONDS: String(DOWN_AFTER_SECONDS),
  HOST_HEARTBEAT_MS: '500',
  LIFECYCLE_INTERVAL_MS: '250',
  WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1',
  WEBHOOK_POLL_INTERVAL_MS: '200',
  // Instances that share a database share the key that seals webhook secrets.
  WEBHOOK_SECRETS_KEY: randomBytes(32).toString('base64'),
};

const cleanups: Array<() => unknown> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function icecastOrigin(instance: Service): Promise<string> {
  const saved = JSON.parse(await readFile(join(instance.dataDir, 'streaming-host.json'), 'utf8'));
  return `http://127.0.0.1:${saved.port}`;
}

/** Host A and host B, set up by the first test and used by the next. */
let a: Service;
let b: Service;
let originA: string;
let originB: string;
let wallet: TestWallet;
/** What every instance after the first needs to share its PostgreSQL and chain. */
let shared: Record<string, string>;

/** Buys a stream through `through`, placed on the host at `origin`: the hosts in `drain` take none meanwhile. */
async function buyOn(through: Service, origin: string, drain: string[], stationName: string) {
  for (const id of drain) {
    const drained = await hostsCommand(a, ['hosts', 'drain', id]);
    assert.equal(drained.code, 0, drained.stderr);
  }
  const bought = await buy({ baseUrl: through.baseUrl, apiKey: a.apiKey }, wallet, {
    product_id: 'event-stream',
    email: 'agent@example.com',
    station_name: stationName,
    parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  for (const id of drain) assert.equal((await hostsCommand(a, ['hosts', 'undrain', id])).code, 0);
  assert.equal(new URL(bought.body.service.stream_url).origin, origin, `placed on ${origin}`);
  return bought.body.service;
}

const buyOnB = (stationName: string) => buyOn(b, originB, ['host-a'], stationName);

function movedToA(serviceId: string, timeoutMs: number) {
  return waitFor(
    'the service to move to host A',
    async () => {
      const read = (await request(a, 'GET', `/services/${serviceId}`)).body.service;
      return new URL(read.stream_url).origin === originA ? read : undefined;
    },
    timeoutMs,
  );
}

test('a lost host: its stream moves to a host with room, is credited, and the host does not take it back', async () => {
  a = await startService({ ...pool, STREAMING_HOST_ID: 'host-a' });
  cleanups.push(() => a.stop());
  const lock = await serveLock(a);
  const dev = await devFile(a);
  shared = { DATABASE_URL: lock.database_url, CHAIN_RPC_URL: dev.chain.rpc_url, DEV_FACILITATOR_ACCOUNT: '4' };
  b = await startService({ ...pool, ...shared, STREAMING_HOST_ID: 'host-b' });
  cleanups.push(() => b.stop());
  const owner = { baseUrl: a.baseUrl, apiKey: a.apiKey };
  [originA, originB] = [await icecastOrigin(a), await icecastOrigin(b)];
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const before = await buyOnB('Lost Host FM');

  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());
  const hook = await request(owner, 'POST', '/webhooks', {
    body: { url: receiver.url, service_id: before.service_id, events: ['service.moved'] },
  });
  assert.equal(hook.status, 201, JSON.stringify(hook.body));
  const sse = await openSse(`${a.baseUrl}/services/${before.service_id}/events`, {
    authorization: `Bearer ${a.apiKey}`,
  });
  cleanups.push(() => sse.close());
  assert.equal(sse.status, 200);

  const encoderOnB = startFfmpegSource(before.broadcast_url);
  cleanups.push(() => encoderOnB.kill('SIGKILL'));
  const listenerOnB = await listenWhenLive(before.stream_url);
  cleanups.push(() => listenerOnB.close());

  const usage = async (on: Service) =>
    (await request({ baseUrl: on.baseUrl, apiKey: a.apiKey }, 'GET', `/services/${before.service_id}/usage`)).body
      .usage;
  const bytesOf = (gb: string) => Math.round(Number(gb) * 1e9);
  const usedOnB = await waitFor('transfer measured on B', async () => {
    const used = bytesOf((await usage(b)).transfer.used_gb);
    return used > 0 && used;
  });

  // B dies with its Icecast (which follows its parent through the parent-death signal).
  const killedAt = Date.now();
  b.process.kill('SIGKILL');
  await exitOf(b.process, 10_000);
  await listenerOnB.ended;

  const moved = await movedToA(before.service_id, (DOWN_AFTER_SECONDS + 30) * 1000);
  const movedAt = Date.now();
  const movedAfterMs = movedAt - killedAt;
  assert.equal(new URL(moved.broadcast_url).host, new URL(originA).host);
  assert.equal(new URL(moved.stream_url).pathname, new URL(before.stream_url).pathname, 'same mount');
  assert.equal(
    moved.broadcast_url.replace(/@[^/]+/, '@'),
    before.broadcast_url.replace(/@[^/]+/, '@'),
    'same source credentials',
  );
  const credit = (Date.parse(moved.expires_at) - Date.parse(before.expires_at)) / 1000;
  assert.ok(credit >= DOWN_AFTER_SECONDS, `the unavailable time is credited (${credit} s)`);
  assert.ok(credit <= Math.ceil(movedAfterMs / 1000) + 2, `no more than the time since the kill (${credit} s)`);

  const delivery = await receiver.next((d) => d.event.type === 'service.moved', 30_000);
  const event = delivery.event;
  assert.equal(event.service_id, before.service_id);
  assert.equal(event.data.stream_url, moved.stream_url);
  assert.equal(event.data.broadcast_url, moved.broadcast_url);
  assert.equal(event.data.expires_at, moved.expires_at);
  assert.equal(event.data.credited_seconds, credit);
  const pushed = await waitFor('service.moved on the event stream', () =>
    sse.messages.find((m) => m.event === 'service.moved'),
  );
  assert.equal(JSON.parse(pushed.data).id, event.id, 'the same event by SSE and webhook');

  // The encoder reconnects to the new broadcast URL; a listener on the new stream URL hears it.
  const encoderOnA = startFfmpegSource(moved.broadcast_url);
  cleanups.push(() => encoderOnA.kill('SIGKILL'));
  const listenerOnA = await listenWhenLive(moved.stream_url);
  cleanups.push(() => listenerOnA.close());
  await waitFor('audio from the moved stream', () => hasMpegFrame(listenerOnA.received()));
  // A's Icecast counts the mount's bytes from zero; the transfer used on B is still counted.
  const onA = await waitFor('transfer measured on A', async () => {
    const read = await usage(a);
    return Date.parse(read.measured_at) > movedAt && read.bytes.sent_to_listeners > 0 && read;
  });
  assert.ok(
    bytesOf(onA.transfer.used_gb) >= usedOnB + Number(onA.bytes.sent_to_listeners),
    `transfer used on B (${usedOnB} bytes) carried over: ${JSON.stringify(onA.transfer)} ${JSON.stringify(onA.bytes)}`,
  );

  // B comes back on the same DATA_DIR and host id: it refuses the moved service's source and listeners.
  b = await startService(b.env, { dataDir: b.dataDir });
  cleanups.push(() => b.stop());
  assert.equal(await icecastOrigin(b), originB, 'B listens where it did');
  await assertSourceRefused(before.broadcast_url);
  await assertListenerRefused(before.stream_url);
  for (const instance of [a, b]) {
    const read = await request(
      { baseUrl: instance.baseUrl, apiKey: a.apiKey },
      'GET',
      `/services/${before.service_id}`,
    );
    assert.equal(read.body.service.stream_url, moved.stream_url, 'the record still says host A');
  }
  assert.equal(await waitFor('A still streams', () => listenerOnA.received().length > 0), true);
});

test('a host cut off past the bound: its stream moves; when it returns it cuts what it still carried', async () => {
  assert.ok(a && b, 'runs after the first test, on its two hosts');
  const before = await buyOnB('Frozen Host FM');
  const encoderOnB = startFfmpegSource(before.broadcast_url);
  cleanups.push(() => encoderOnB.kill('SIGKILL'));
  const listenerOnB = await listenWhenLive(before.stream_url);
  cleanups.push(() => listenerOnB.close());

  // B's process stops (as if cut off from PostgreSQL); its Icecast goes on serving what is connected.
  b.process.kill('SIGSTOP');
  cleanups.push(() => b.process.kill('SIGCONT'));
  const moved = await movedToA(before.service_id, (DOWN_AFTER_SECONDS + 30) * 1000);
  const encoderOnA = startFfmpegSource(moved.broadcast_url);
  cleanups.push(() => encoderOnA.kill('SIGKILL'));
  const listenerOnA = await listenWhenLive(moved.stream_url);
  cleanups.push(() => listenerOnA.close());

  // B runs again: it beats (up again), learns that the service moved, and cuts its source and listener there.
  b.process.kill('SIGCONT');
  await within(listenerOnB.ended, 20_000, 'timed out waiting for B to cut the listener of the moved mount');
  assert.notEqual(await exitOf(encoderOnB, 20_000), 0, 'the old source is cut');
  await assertSourceRefused(before.broadcast_url);
  await assertListenerRefused(before.stream_url);
  await waitFor('audio from the moved stream', () => hasMpegFrame(listenerOnA.received()));
  const read = (await request(a, 'GET', `/services/${before.service_id}`)).body.service;
  assert.equal(read.stream_url, moved.stream_url, 'the record still says host A');
});

// Fencing: a host that never died but lost PostgreSQL (a network partition: its queries hang, they do not fail)
// cannot learn that its services moved. Its lease (the last heartbeat it wrote) runs out before the pool counts it
// down: it cuts every mount and admits nothing on its own, and the pool moves the stream to another host.
test('a host cut off from PostgreSQL cuts its mounts on its own; back, it refuses what moved away', async () => {
  assert.ok(a && b, 'runs after the first test, on its two hosts');
  const database = new URL(shared.DATABASE_URL);
  const partition = await startTcpPartition({ host: database.hostname, port: Number(database.port) });
  cleanups.push(() => partition.close());
  const throughPartition = new URL(database);
  throughPartition.port = String(partition.port);
  const c = await startService(
    { ...pool, ...shared, DATABASE_URL: throughPartition.toString(), STREAMING_HOST_ID: 'host-c' },
    { args: ['--role', 'host'] },
  );
  cleanups.push(async () => {
    partition.heal();
    await c.stop();
  });
  const originC = await icecastOrigin(c);
  const before = await buyOn(a, originC, ['host-a', 'host-b'], 'Partitioned FM');
  const encoderOnC = startFfmpegSource(before.broadcast_url);
  cleanups.push(() => encoderOnC.kill('SIGKILL'));
  const listenerOnC = await listenWhenLive(before.stream_url);
  cleanups.push(() => listenerOnC.close());

  partition.cut();
  // Only C itself can end them: nothing reaches it from PostgreSQL, and nobody else drives its Icecast.
  await Promise.all([
    within(listenerOnC.ended, 30_000, 'timed out waiting for C to cut its listener'),
    exitOf(encoderOnC, 30_000),
  ]);
  await assertSourceRefused(before.broadcast_url);
  await assertListenerRefused(before.stream_url);
  const moved = await waitFor(
    'the service to move off C',
    async () => {
      const read = (await request(a, 'GET', `/services/${before.service_id}`)).body.service;
      return new URL(read.stream_url).origin !== originC ? read : undefined;
    },
    (DOWN_AFTER_SECONDS + 30) * 1000,
  );

  // The partition ends: C beats again (up) and answers from PostgreSQL, where the service is on another host.
  partition.heal();
  await waitFor(
    'C to beat again',
    async () => {
      const listed = JSON.parse((await hostsCommand(a, ['hosts', 'list', '--json'])).stdout) as Array<
        Record<string, unknown>
      >;
      const hostC = listed.find((h) => h.id === 'host-c')!;
      return hostC.state === 'up' && hostC.live === true;
    },
    30_000,
  );
  await assertSourceRefused(before.broadcast_url);
  await assertListenerRefused(before.stream_url);
  const encoderMoved = startFfmpegSource(moved.broadcast_url);
  cleanups.push(() => encoderMoved.kill('SIGKILL'));
  const listenerMoved = await listenWhenLive(moved.stream_url);
  cleanups.push(() => listenerMoved.close());
  await waitFor('audio from the moved stream', () => hasMpegFrame(listenerMoved.received()));
});
