import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { HostLease } from '../src/hosts/index.js';
import { buy } from './support/purchase.js';
import { startService, type Service } from './support/service.js';
import { exitOf, startFfmpegSource, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { startTcpPartition, type TcpPartition } from './support/tcp-partition.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// A host's lease: an API instance (PostgreSQL's and the chain's) sells streams on host C, an instance of
// both roles that reaches PostgreSQL through a TCP partition. Cut off, C's lease runs out: it cuts its mounts, refuses
// new HLS sessions without asking PostgreSQL and says so in /health/details and its metrics. When the partition heals
// and the connections it had stay silent, C takes its lease again within a few heartbeats and serves again.
requireStreamingTools();

const DOWN_AFTER_SECONDS = 3;
const HEARTBEAT_MS = 500;
const pool = {
  HOST_DOWN_AFTER_SECONDS: String(DOWN_AFTER_SECONDS),
  HOST_HEARTBEAT_MS: String(HEARTBEAT_MS),
  LIFECYCLE_INTERVAL_MS: '250',
};

const cleanups: Array<() => unknown> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** An HTTP answer, or undefined when none came within `ms` (C's requests may wait on PostgreSQL). */
async function get(url: string, ms = 15_000): Promise<{ status: number; text: string } | undefined> {
  try {
    const answer = await fetch(url, { signal: AbortSignal.timeout(ms) });
    return { status: answer.status, text: await answer.text() };
  } catch {
    return undefined;
  }
}

async function leaseOf(c: Service) {
  const details = await get(c.metricsUrl.replace(/\/metrics$/, '/health/details'));
  assert.ok(details, 'the health details answer');
  return JSON.parse(details.text).checks.hosts as {
    ok: boolean;
    error?: string;
    this_host: { id: string; lease: { held: boolean; losses: number; renewed_ms_ago: number | null } };
  };
}

async function metric(c: Service, name: string): Promise<number | undefined> {
  const scraped = await get(c.metricsUrl);
  const line = scraped?.text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

test('a lease ends once, when its last written beat is too old, even one written late', async () => {
  const lease = new HostLease(1, 100); // a lease of 900 ms
  let lost = 0;
  lease.onLost = () => lost++;
  lease.renew(performance.now() - 850);
  assert.equal(lease.held, true);
  await waitFor('the lease to end', () => lost === 1, 5000);
  assert.deepEqual([lease.held, lease.losses], [false, 1]);
  // A beat written after its own lease had passed renews nothing, and the loss is not counted twice.
  lease.renew(performance.now() - 1000);
  // The lease's timer (due now) was set before this one, so it has run by the time this one does.
  await new Promise((resolve) => setTimeout(resolve, 1));
  assert.deepEqual([lease.held, lease.losses, lost], [false, 1, 1]);
  lease.renew(performance.now());
  assert.equal(lease.held, true);
  lease.stop();
});

test('without its lease a host refuses HLS and says so; once healed it takes the lease again', async () => {
  const api = await startService(pool, { args: ['--role', 'api'] });
  cleanups.push(() => api.stop());
  const lock = await serveLock(api);
  const dev = await devFile(api);
  const database = new URL(lock.database_url);
  const partition: TcpPartition = await startTcpPartition({ host: database.hostname, port: Number(database.port) });
  cleanups.push(() => partition.close());
  const throughPartition = new URL(database);
  throughPartition.port = String(partition.port);
  const c = await startService({
    ...pool,
    DATABASE_URL: throughPartition.toString(),
    CHAIN_RPC_URL: dev.chain.rpc_url,
    DEV_FACILITATOR_ACCOUNT: '4',
    STREAMING_HOST_ID: 'host-c',
  });
  cleanups.push(async () => {
    partition.heal(); // the silent connections are reset: C's shutdown does not wait on them
    await c.stop();
  });

  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const bought = await buy({ baseUrl: api.baseUrl, apiKey: api.apiKey }, wallet, {
    product_id: 'event-stream',
    email: 'agent@example.com',
    station_name: 'Lease FM',
    parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  const service = bought.body.service;
  const hlsUrl = `${c.baseUrl}/hls/${service.service_id}/index.m3u8`;
  const encoder = startFfmpegSource(service.broadcast_url);
  cleanups.push(() => encoder.kill('SIGKILL'));
  await waitFor('HLS from host C', async () => (await get(hlsUrl))?.status === 200, 60_000);
  const held = (await leaseOf(c)).this_host.lease;
  assert.equal(held.held, true);
  assert.equal(await metric(c, 'streaming_host_lease_held'), 1);
  // A loaded machine may have delayed a beat past the lease before (and the lease come back): counted from here.
  const lossesBefore = held.losses as number;

  // Cut off: only C itself can end its stream, once its lease runs out.
  partition.cut();
  await exitOf(encoder, 30_000);
  const refused = await get(hlsUrl);
  assert.ok(refused, 'refused at once: the lease is checked before anything is read from PostgreSQL');
  assert.equal(refused.status, 503, refused.text);
  const error = JSON.parse(refused.text).error;
  assert.equal(error.code, 'host_lease_lost');
  assert.equal(error.retryable, true);
  assert.match(error.message, new RegExp(`GET /services/${service.service_id}`));
  const lost = await leaseOf(c);
  assert.equal(lost.ok, false);
  assert.match(lost.error ?? '', /host-c.*lost its lease/);
  assert.deepEqual(
    [lost.this_host.id, lost.this_host.lease.held, lost.this_host.lease.losses],
    ['host-c', false, lossesBefore + 1],
  );

  // Healed, but the connections C had stay silent (its heartbeat hung on one): the beat gives up on it and opens
  // another, so the lease comes back within its bound instead of after TCP's retransmission.
  partition.heal({ keepSilent: true });
  await waitFor('C to take its lease again', async () => (await leaseOf(c)).this_host.lease.held, 30_000);
  assert.equal(await metric(c, 'streaming_host_lease_losses_total'), lossesBefore + 1);
  assert.equal(await metric(c, 'streaming_host_lease_held'), 1);
  const again = startFfmpegSource(service.broadcast_url);
  cleanups.push(() => again.kill('SIGKILL'));
  await waitFor('HLS from host C again', async () => (await get(hlsUrl))?.status === 200, 60_000);
});
