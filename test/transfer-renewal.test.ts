import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { buy, payFor } from './support/purchase.js';
import { request, type Service } from './support/service.js';
import { shortLivedCatalog, startShortLivedService } from './support/short-catalog.js';
import { listenWhenLive, startFfmpegSource, waitFor, type Listener } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { TestWallet } from './support/wallet.js';
import { buyerWallet } from './support/dev-file.js';
import { connectDatabase } from './support/serve-lock.js';

// A renewal of used-up transfer (an upgrade of a suspended service) starts the new allowance empty: bytes of the
// listeners cut at the suspension belong to the old allowance even when they are counted after the renewal.
requireStreamingTools(['icecast2', 'ffmpeg', 'haproxy']);

let service: Service;
let wallet: TestWallet;
let db: pg.Client;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
const processes: ChildProcess[] = [];
const sockets: net.Socket[] = [];
const listeners: Listener[] = [];

before(async () => {
  // Behind HAProxy a finished listener's access-log line waits (up to 5 s) for HAProxy's count of the bytes it sent.
  ({ catalog, service } = await startShortLivedService({ ICECAST_PROXY: 'haproxy' }));
  wallet = await buyerWallet(service);
  db = await connectDatabase(service);
});
after(async () => {
  for (const s of sockets) s.destroy();
  for (const l of listeners) l.close();
  for (const p of processes) p.kill('SIGKILL');
  await db?.end();
  await service?.stop();
  await catalog?.remove();
});

function source(url: string): ChildProcess {
  const child = startFfmpegSource(url, 64);
  processes.push(child);
  return child;
}

/** A listener through HAProxy from 127.0.0.2 on a raw socket, whose reading can be stopped. */
function rawListener(streamUrl: string): Promise<{ socket: net.Socket; received: () => number; status: () => number }> {
  const url = new URL(streamUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port: Number(url.port), host: '127.0.0.1', localAddress: '127.0.0.2' });
    sockets.push(socket);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.once('error', reject);
    socket.once('connect', () => {
      socket.write(`GET ${url.pathname} HTTP/1.0\r\nHost: 127.0.0.1\r\nUser-Agent: renewal-test\r\n\r\n`);
      const head = () => Buffer.concat(chunks).toString('latin1', 0, 64);
      resolve({
        socket,
        received: () => chunks.reduce((n, c) => n + c.length, 0),
        status: () => Number(/^HTTP\/1\.\d (\d{3})/.exec(head())?.[1] ?? 0),
      });
    });
  });
}

const usage = async (id: string) => (await request(service, 'GET', `/services/${id}/usage`)).body.usage;

describe('a renewal of used-up transfer', () => {
  test('bought as soon as the service is suspended, it is not eaten by the cut listener bytes counted after it', async () => {
    // 30 kB: a few seconds of a 64 kbps stream.
    const bought = await buy(service, wallet, {
      product_id: 'instant-stream',
      email: 'ops@example.com',
      station_name: 'Renewal FM',
      parameters: { duration_hours: 0.05, max_listeners: 2, bitrate_kbps: 64, transfer_gb: 0.00003 },
    });
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const svc = bought.body.service as { service_id: string; stream_url: string; broadcast_url: string };
    source(svc.broadcast_url);
    const listener = await waitFor(
      'the mount to go live',
      async () => {
        const l = await rawListener(svc.stream_url);
        await waitFor('an answer', async () => l.status() || (l.socket.destroyed ? -1 : undefined), 15_000);
        if (l.status() === 200) return l;
        l.socket.destroy();
        await sleep(500);
        return undefined;
      },
      90_000,
    );
    // A listener whose reading stalls: when Icecast cuts it, HAProxy waits for it to take the rest and reports its
    // connection's bytes only then, so its access-log line is counted late, with Icecast's own figure.
    await waitFor('audio', async () => listener.received() > 4000 || undefined, 10_000);
    listener.socket.pause();
    const suspended = await waitFor(
      'the suspension',
      async () => {
        const u = await usage(svc.service_id);
        return u.status === 'suspended' ? u : undefined;
      },
      60_000,
    );
    assert.match(suspended.status_reason, /more than the 0\.00003 GB bought/);

    // As a buyer does: the upgrade is bought as soon as the service is suspended.
    const resumed = await payFor(service, wallet, `/services/${svc.service_id}/upgrade`, {
      product_id: 'event-stream',
    });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.service.status, 'active');
    assert.equal(resumed.body.service.limits.transfer_gb, 0.00003, 'the same allowance, renewed');

    // Every byte of the suspended period is counted within seconds: HAProxy's report, or Icecast's figure after 5 s.
    let last: any;
    const counted = await waitFor(
      "the cut listener's bytes",
      async () => {
        last = await usage(svc.service_id);
        return last.bytes.sent_to_listeners > 30_000 ? last : undefined;
      },
      30_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}: ${JSON.stringify(last)}`);
    });
    await sleep(3000);
    const renewed = await usage(svc.service_id);
    assert.equal(
      renewed.status,
      'active',
      `the renewed allowance was used up at once: ${JSON.stringify({ counted: counted.bytes, renewed: renewed.transfer, reason: renewed.status_reason })}`,
    );
    assert.equal(renewed.transfer.used_gb, '0', 'nobody listened since the renewal');
    assert.ok(renewed.bytes.sent_to_listeners > 30_000, 'the cut listener is counted');
    // Saved, so it holds after the minute in which late counts are still looked for.
    const {
      rows: [row],
    } = await db.query('SELECT transfer_offset_bytes::text AS offset FROM services WHERE id = $1', [svc.service_id]);
    assert.equal(
      Number(row.offset),
      renewed.bytes.sent_to_listeners,
      'the offset is the final count of the old allowance',
    );
    listener.socket.destroy();

    // The source is admitted again, and its listeners' bytes count against the new allowance.
    source(svc.broadcast_url);
    const again = await listenWhenLive(svc.stream_url, 90_000);
    listeners.push(again);
    await waitFor(
      'transfer used again',
      async () => Number((await usage(svc.service_id)).transfer.used_gb) > 0 || undefined,
      30_000,
    );
  });
});
