import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { programsUsing } from './support/processes.js';
import { buy } from './support/purchase.js';
import { request, startService, withoutCapacityReserve, type Service } from './support/service.js';
import { expireIn } from './support/expiry.js';
import { shortLivedCatalog, startShortLivedService } from './support/short-catalog.js';
import {
  connectListener,
  exitOf,
  hasMpegFrame,
  startFfmpegSource,
  waitFor,
  within,
  type Listener,
} from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { buyerWallet } from './support/dev-file.js';

// Paid streams outlive restarts of serve: a service belongs to its streaming host by the host's id, its addresses
// follow the host's current address, and the life-cycle worker and the capacity count still cover it.
requireStreamingTools();

let service: Service;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
let env: Record<string, string>;
const processes: ChildProcess[] = [];
const listeners: Listener[] = [];

before(async () => {
  // One wallet fills this 2-slot host.
  ({ catalog, env, service } = await startShortLivedService({ ICECAST_MAX_SOURCES: '2' }, withoutCapacityReserve));
});
after(async () => {
  for (const l of listeners) l.close();
  for (const p of processes) p.kill('SIGKILL');
  await service?.stop();
  await catalog?.remove();
});

async function wallet(): Promise<TestWallet> {
  return buyerWallet(service);
}

interface Bought {
  service_id: string;
  stream_url: string;
  broadcast_url: string;
  expires_at: string;
}

async function stream(durationHours: number): Promise<Bought> {
  const r = await buy(service, await wallet(), {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: 'Restart FM',
    parameters: { duration_hours: durationHours, max_listeners: 2, bitrate_kbps: 64 },
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.service;
}

function source(url: string): ChildProcess {
  const child = startFfmpegSource(url);
  processes.push(child);
  return child;
}

/** A listener that gets audio from this URL (the source may take a moment to connect). */
async function hears(url: string): Promise<Listener> {
  const listener = await waitFor(
    `audio on ${url}`,
    async () => {
      const l = await connectListener(url).catch(() => undefined);
      if (l?.status === 200) return l;
      l?.close();
      return undefined;
    },
    30_000,
  );
  listeners.push(listener);
  await waitFor('MPEG frames', () => hasMpegFrame(listener.received()), 15_000);
  return listener;
}

async function restart(signal: NodeJS.Signals): Promise<void> {
  await service.stop(signal);
  service = await startService(env, { dataDir: service.dataDir });
}

const usage = async (id: string) => (await request(service, 'GET', `/services/${id}/usage`)).body.usage;
const record = async (id: string) => (await request(service, 'GET', `/services/${id}`)).body.service;
const icecastPort = () => JSON.parse(readFileSync(join(service.dataDir, 'streaming-host.json'), 'utf8')).port as number;

describe('restarts keep paid streams', () => {
  let long: Bought;

  test('SIGINT: the same broadcast and listen URLs work again', async () => {
    long = await stream(0.2);
    const first = source(long.broadcast_url);
    (await hears(long.stream_url)).close();
    await restart('SIGINT');
    await exitOf(first, 15_000).catch(() => first.kill('SIGKILL'));
    const after = await record(long.service_id);
    assert.equal(after.stream_url, long.stream_url);
    assert.equal(after.broadcast_url, long.broadcast_url);
    source(long.broadcast_url);
    (await hears(long.stream_url)).close();
  });

  test('SIGKILL: no orphan is left running, the URLs work again, and expiry still cuts', async () => {
    // Bought long enough to outlive any restart; its end is moved near once it plays again.
    const short = await stream(0.2);
    // Both of the long stream's places are held when serve is killed: the ends of their connections are never told
    // (HAProxy dies with serve), and the restarted serve must not count them.
    await hears(long.stream_url);
    await hears(long.stream_url);
    const pgPid = Number((await readFile(join(service.dataDir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0]);
    await restart('SIGKILL');
    assert.throws(() => process.kill(pgPid, 0), 'the PostgreSQL of the killed serve was stopped');
    assert.match(service.output(), /stopped the PostgreSQL left running/);
    const programs = programsUsing(service.dataDir);
    for (const name of ['icecast2', 'anvil', 'postgres'])
      assert.equal(programs.filter((p) => p === name).length, 1, `one ${name}, the new one: ${programs.join(', ')}`);

    source(long.broadcast_url);
    (await hears(long.stream_url)).close();
    const encoder = source(short.broadcast_url);
    const listener = await hears(short.stream_url);
    // Its source and listener are already connected: nothing is left to set up before the end.
    const expiresAt = await expireIn(service, short.service_id, 1);
    const untilExpiry = expiresAt.getTime() - Date.now();
    assert.notEqual(await exitOf(encoder, untilExpiry + 15_000), null, 'the source was cut at expiry');
    await within(listener.ended, 15_000, 'the listener was not cut');
    assert.equal((await record(short.service_id)).status, 'expired');
  });

  test('the capacity count still covers the services of before the restart', async () => {
    // ICECAST_MAX_SOURCES=2: the long stream and one more fit; the expired one gave its slot back.
    const another = await stream(0.2);
    const refused = await request(service, 'POST', '/orders', {
      headers: { 'idempotency-key': `restart-${process.pid}` },
      body: {
        product_id: 'instant-stream',
        email: 'ops@example.com',
        station_name: 'Full FM',
        parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
      },
    });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'capacity_exhausted');
    assert.ok(another.service_id);
  });

  test('the old Icecast port taken by something else: the addresses move, and work, and usage counts on', async () => {
    // The long stream's source has run since the last restart: more than the first seconds after this one could add.
    const readBefore = await waitFor(
      'usage measured',
      async () => {
        const read = (await usage(long.service_id)).bytes.read_from_source;
        return read >= 80_000 && read;
      },
      30_000,
    );
    await service.stop('SIGINT');
    const restartedAt = Date.now();
    const oldPort = icecastPort();
    const blocker: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      blocker.once('error', reject);
      blocker.listen(oldPort, '127.0.0.1', () => resolve());
    });
    try {
      service = await startService(env, { dataDir: service.dataDir });
      const moved = await record(long.service_id);
      assert.notEqual(icecastPort(), oldPort);
      assert.equal(new URL(moved.stream_url).port, String(icecastPort()));
      assert.notEqual(moved.stream_url, long.stream_url);
      assert.equal(new URL(moved.stream_url).pathname, new URL(long.stream_url).pathname, 'same mount');
      assert.match(moved.broadcast_url, new RegExp(`@127\\.0\\.0\\.1:${icecastPort()}/`));
      source(moved.broadcast_url);
      (await hears(moved.stream_url)).close();
      // The meter goes on counting the service at its new address (its state is kept under the host's id).
      const seen: number[] = [];
      await waitFor(
        'usage counted on from before the restart',
        async () => {
          const u = await usage(long.service_id);
          if (Date.parse(u.measured_at) > restartedAt) seen.push(u.bytes.read_from_source);
          return seen.at(-1)! > readBefore;
        },
        20_000,
      ).catch((e) => {
        throw new Error(
          `${e.message}: ${readBefore} bytes read before the restart, after: ${[...new Set(seen)].join(', ')}`,
        );
      });
      assert.ok(Math.min(...seen) >= readBefore, `never counted from zero again: ${[...new Set(seen)].join(', ')}`);
    } finally {
      blocker.close();
    }
  });
});

describe('an orphan PostgreSQL is stopped only if it really is one', () => {
  test('a postmaster.pid naming another live process: that process is left alone, serve starts', async () => {
    await service.stop('SIGINT');
    const stranger = spawn('sleep', ['600'], { stdio: 'ignore' });
    processes.push(stranger);
    const pidFile = join(service.dataDir, 'pg', 'postmaster.pid');
    await writeFile(pidFile, `${stranger.pid}\n${join(service.dataDir, 'pg')}\n`);
    service = await startService(env, { dataDir: service.dataDir });
    assert.equal(stranger.exitCode, null);
    assert.equal(stranger.signalCode, null, 'the stranger was not signalled');
    process.kill(stranger.pid!, 0);
    assert.equal((await request(service, 'GET', '/health')).status, 200);
  });
});
