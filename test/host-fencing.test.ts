import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import {
  assertListenerRefused,
  assertSourceRefused,
  exitOf,
  listenWhenLive,
  startFfmpegSource,
  waitFor,
  within,
} from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { startTcpPartition, type TcpPartition } from './support/tcp-partition.js';
import { TestWallet } from './support/wallet.js';

// Issue 24, fencing: a streaming host that never died but lost PostgreSQL (a network partition: its queries hang, they
// do not fail) cannot learn that its services moved. Its lease (the last heartbeat it wrote) runs out before the pool
// counts it down, and it cuts every mount and admits nothing on its own; the pool moves the stream to another host.
// When the partition ends, the host still refuses what moved away.
requireStreamingTools();

const DOWN_AFTER_SECONDS = 3;
const pool = { HOST_DOWN_AFTER_SECONDS: String(DOWN_AFTER_SECONDS), HOST_HEARTBEAT_MS: '500' };

const cleanups: Array<() => unknown> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

test('a host cut off from PostgreSQL cuts its mounts on its own; back, it refuses what moved away', async () => {
  const a = await startService({ ...pool, STREAMING_HOST_ID: 'fence-a' });
  cleanups.push(() => a.stop());
  const lock = JSON.parse(await readFile(join(a.dataDir, 'serve.lock'), 'utf8'));
  const dev = JSON.parse(await readFile(join(a.dataDir, 'dev.json'), 'utf8'));
  const database = new URL(lock.database_url);
  const partition: TcpPartition = await startTcpPartition({ host: database.hostname, port: Number(database.port) });
  cleanups.push(() => partition.close());
  const throughPartition = new URL(database);
  throughPartition.port = String(partition.port);
  const b: Service = await startService(
    {
      ...pool,
      DATABASE_URL: throughPartition.toString(),
      CHAIN_RPC_URL: dev.chain.rpc_url,
      STREAMING_HOST_ID: 'fence-b',
    },
    { args: ['--role', 'host'] },
  );
  cleanups.push(async () => {
    partition.heal();
    await b.stop();
  });

  // Placed on B: A takes no placements meanwhile.
  assert.equal((await a.cli(['hosts', 'drain', 'fence-a'])).code, 0);
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await buy(a, wallet, {
    product_id: 'event-stream',
    email: 'agent@example.com',
    station_name: 'Partitioned FM',
    parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  assert.equal((await a.cli(['hosts', 'undrain', 'fence-a'])).code, 0);
  const before = bought.body.service;
  const hosts = JSON.parse((await a.cli(['hosts', 'list', '--json'])).stdout) as Array<{
    id: string;
    public_url: string;
  }>;
  const originB = new URL(hosts.find((h) => h.id === 'fence-b')!.public_url).origin;
  assert.equal(new URL(before.stream_url).origin, originB, 'placed on B');

  const encoderOnB = startFfmpegSource(before.broadcast_url);
  cleanups.push(() => encoderOnB.kill('SIGKILL'));
  const listenerOnB = await listenWhenLive(before.stream_url);
  cleanups.push(() => listenerOnB.close());

  partition.cut();
  // Only B itself can end them: nothing reaches it from PostgreSQL, and nobody else drives its Icecast.
  await Promise.all([within('B to cut its listener', listenerOnB.ended, 30_000), exitOf(encoderOnB, 30_000)]);
  await assertSourceRefused(before.broadcast_url);
  await assertListenerRefused(before.stream_url);

  const moved = await waitFor(
    'the service to move to A',
    async () => {
      const read = (await request(a, 'GET', `/services/${before.service_id}`)).body.service;
      return new URL(read.stream_url).origin !== originB ? read : undefined;
    },
    (DOWN_AFTER_SECONDS + 30) * 1000,
  );
  const encoderOnA = startFfmpegSource(moved.broadcast_url);
  cleanups.push(() => encoderOnA.kill('SIGKILL'));
  const listenerOnA = await listenWhenLive(moved.stream_url);
  cleanups.push(() => listenerOnA.close());

  // The partition ends: B beats again (up) and answers from PostgreSQL, where the service is on A.
  partition.heal();
  await waitFor(
    'B to beat again',
    async () => {
      const listed = JSON.parse((await a.cli(['hosts', 'list', '--json'])).stdout) as Array<Record<string, unknown>>;
      const hostB = listed.find((h) => h.id === 'fence-b')!;
      return hostB.state === 'up' && hostB.live === true;
    },
    30_000,
  ).catch((e) => {
    console.log(b.output().slice(-6000));
    throw e;
  });
  await assertSourceRefused(before.broadcast_url);
  await assertListenerRefused(before.stream_url);
  assert.equal(listenerOnA.status, 200, 'A streams it');
});
