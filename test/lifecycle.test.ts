import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { buy, payFor } from './support/purchase.js';
import { request, type Service } from './support/service.js';
import { expireIn } from './support/expiry.js';
import { shortLivedCatalog, startShortLivedService } from './support/short-catalog.js';
import {
  connectListener,
  exitOf,
  hasMpegFrame,
  listenWhenLive,
  startFfmpegSource,
  waitFor,
  within,
  type Listener,
} from './support/streaming.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { mp3, sine } from './support/tones.js';
import { buyerWallet } from './support/dev-file.js';
import { connectDatabase } from './support/serve-lock.js';

requireStreamingTools();

/**
 * The bitrate budget's window, half the default 30 s, so a loud source is cut sooner. Icecast counts the bytes read
 * in 5 s steps: each step takes 5 s of the window at once, and a source at the bought bitrate must never empty it.
 */
const WINDOW_SECONDS = 15;

let service: Service;
let wallet: TestWallet;
let db: pg.Client;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
const processes: ChildProcess[] = [];
const listeners: Listener[] = [];

before(async () => {
  ({ catalog, service } = await startShortLivedService({ SOURCE_BITRATE_WINDOW_SECONDS: String(WINDOW_SECONDS) }));
  wallet = await buyerWallet(service);
  db = await connectDatabase(service);
});
after(async () => {
  for (const l of listeners) l.close();
  for (const p of processes) p.kill('SIGKILL');
  await db?.end();
  await service?.stop();
  await catalog?.remove();
});

const stream = (parameters: Record<string, unknown>, product = 'instant-stream') =>
  buy(service, wallet, { product_id: product, email: 'ops@example.com', station_name: 'Cycle FM', parameters }).then(
    (r) => {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body.service as { service_id: string; stream_url: string; broadcast_url: string; expires_at: string };
    },
  );

function source(url: string, kbps = 64): ChildProcess {
  const child = startFfmpegSource(url, kbps);
  processes.push(child);
  return child;
}

/**
 * A listener once the mount is live. The source is an ffmpeg started beside the other tests' encoders: on a loaded
 * machine it can take well over the default 20 s to connect, so the bound is wide (it returns as soon as it is live).
 */
async function listen(url: string): Promise<Listener> {
  const listener = await listenWhenLive(url, 90_000).catch((e: Error) => {
    // What the service logged about this mount and its AutoDJ says which side held it.
    const mount = new URL(url).pathname;
    const lines = service
      .output()
      .split('\n')
      .filter((line) => line.includes(mount) || /AutoDJ|source/.test(line));
    throw new Error(`${e.message}; the service's log about it:\n${lines.slice(-40).join('\n')}`);
  });
  listeners.push(listener);
  return listener;
}

const usage = async (id: string) => (await request(service, 'GET', `/services/${id}/usage`)).body.usage;

/** Returns once the life-cycle worker has measured the service `count` times after this call (each pass measures). */
async function workerPasses(id: string, count: number): Promise<void> {
  let seen = Date.now();
  for (let pass = 0; pass < count; pass++) {
    const after = seen;
    seen = await waitFor(
      `life-cycle pass ${pass + 1}`,
      async () => {
        const measured = Date.parse((await usage(id)).measured_at);
        return measured > after ? measured : undefined;
      },
      10_000,
    );
  }
}

// Each test buys its own service and mostly waits on real time (an expiry, Icecast's 5 s refreshes): side by side.
describe('service life cycle', { concurrency: true }, () => {
  test('at expires_at the source and the listeners are cut, new connections refused, status expired', async () => {
    // Bought for long enough to go live on a loaded machine; its end is then moved to a few seconds from now.
    const svc = await stream({ duration_hours: 0.05, max_listeners: 2, bitrate_kbps: 64 });
    const encoder = source(svc.broadcast_url);
    const listener = await listen(svc.stream_url);
    await waitFor('audio', () => hasMpegFrame(listener.received()), 10_000);
    const untilExpiry = (await expireIn(service, svc.service_id, 3)).getTime() - Date.now();

    assert.notEqual(await exitOf(encoder, untilExpiry + 8000), null, 'the source was disconnected');
    await within(listener.ended, 20_000, 'the listener was not cut');
    const record = await request(service, 'GET', `/services/${svc.service_id}`);
    assert.equal(record.body.service.status, 'expired');
    assert.match(record.body.status_reason, /paid time ended/);
    const late = await connectListener(svc.stream_url).catch(() => undefined);
    assert.notEqual(late?.status, 200, 'no listener after expiry');
    late?.close();
    const again = source(svc.broadcast_url);
    assert.notEqual(await exitOf(again, 15_000), 0, 'no source after expiry');
    const events = (await usage(svc.service_id)).events;
    assert.ok(events.some((e: any) => e.kind === 'transition' && e.to_status === 'expired'));
  });

  test('a burst of listeners never exceeds max_listeners, also while the worker reconciles', async () => {
    const svc = await stream({ duration_hours: 0.05, max_listeners: 5, bitrate_kbps: 64 });
    source(svc.broadcast_url);
    listeners.push(await listen(svc.stream_url));
    const burst = await Promise.all(
      Array.from({ length: 40 }, () => connectListener(svc.stream_url).catch(() => undefined)),
    );
    for (const l of burst) if (l) listeners.push(l);
    assert.equal(burst.filter((l) => l?.status === 200).length, 4, 'one was already connected: four more, no more');
    await workerPasses(svc.service_id, 3);
    const late = await connectListener(svc.stream_url).catch(() => undefined);
    assert.notEqual(late?.status, 200, 'still full after the worker reconciled');
    late?.close();
  });

  test('a source above the bought bitrate is disconnected, with the reason on record', async () => {
    const svc = await stream({ duration_hours: 0.02, max_listeners: 2, bitrate_kbps: 32 });
    const loud = source(svc.broadcast_url, 128);
    assert.notEqual(await exitOf(loud, 30_000), null, 'the over-bitrate source was disconnected');
    const record = await request(service, 'GET', `/services/${svc.service_id}`);
    assert.equal(record.body.service.status, 'active', 'the service itself stays active');
    assert.match(record.body.status_reason, /more than the 32 kbps bought/);
    assert.ok((await usage(svc.service_id)).events.some((e: any) => e.code === 'source_over_bitrate'));
  });

  test('bought transfer used up: suspended, source and listeners cut', async () => {
    const svc = await stream({ duration_hours: 0.05, max_listeners: 2, bitrate_kbps: 64, transfer_gb: 0.00003 });
    const encoder = source(svc.broadcast_url);
    const listener = await listen(svc.stream_url);
    assert.notEqual(await exitOf(encoder, 30_000), null, 'the source was disconnected');
    await within(listener.ended, 20_000, 'the listener was not cut');
    const record = await request(service, 'GET', `/services/${svc.service_id}`);
    assert.equal(record.body.service.status, 'suspended');
    assert.match(record.body.status_reason, /more than the 0\.00003 GB bought/);
    const u = await usage(svc.service_id);
    assert.ok(Number(u.transfer.used_gb) > 0.00003);
    const refused = await connectListener(svc.stream_url).catch(() => undefined);
    assert.notEqual(refused?.status, 200, 'a suspended stream admits nobody');
    refused?.close();

    // Bought as soon as the service is suspended, as a buyer does: the cut listener's last bytes, counted after the
    // renewal, belong to the old allowance (test/transfer-renewal.test.ts).
    const resumed = await payFor(service, wallet, `/services/${svc.service_id}/upgrade`, {
      product_id: 'event-stream',
    });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.equal(resumed.body.service.status, 'active', 'an upgrade ends the suspension');
    // As encoders do, it connects again when refused: a host may hear of the upgrade a moment after the API answers.
    let again = source(svc.broadcast_url);
    const reconnect = setInterval(() => {
      if (again.exitCode !== null || again.signalCode !== null) again = source(svc.broadcast_url);
    }, 2_000);
    try {
      await listen(svc.stream_url);
    } finally {
      clearInterval(reconnect);
    }
  });

  test('an upgrade is paid with x402, keeps the listener connected and resumes a suspended service', async () => {
    const svc = await stream({ duration_hours: 0.05, max_listeners: 2, bitrate_kbps: 64 });
    source(svc.broadcast_url);
    const listener = await listen(svc.stream_url);
    await waitFor('audio', () => listener.received().length > 8000, 10_000);

    const ask = await request(service, 'POST', `/services/${svc.service_id}/upgrade`, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': `up-${svc.service_id}` },
    });
    assert.equal(ask.status, 402);
    assert.equal(
      decodePaymentRequiredHeader(ask.headers.get('payment-required')!).accepts[0].amount,
      '270000',
      'same formula: the order minimum',
    );
    const wrong = await request(service, 'POST', `/services/${svc.service_id}/upgrade`, {
      body: { product_id: 'temporary-autodj' },
      headers: { 'idempotency-key': `up2-${svc.service_id}` },
    });
    assert.equal(wrong.status, 409);
    assert.equal(wrong.body.error.code, 'upgrade_not_possible');

    const before = listener.received().length;
    const upgraded = await payFor(
      service,
      wallet,
      `/services/${svc.service_id}/upgrade`,
      { product_id: 'event-stream' },
      `up-${svc.service_id}`,
    );
    assert.equal(upgraded.status, 200, JSON.stringify(upgraded.body));
    assert.equal(upgraded.body.service.service_id, svc.service_id);
    assert.equal(upgraded.body.service.stream_url, svc.stream_url);
    assert.equal(upgraded.body.service.expires_at, svc.expires_at, 'the paid time is unchanged');
    assert.equal(
      (await request(service, 'GET', `/services/${svc.service_id}`)).body.status_reason,
      'Upgraded from instant-stream to event-stream.',
    );
    await waitFor('audio after the upgrade', () => listener.received().length > before + 16_000, 10_000);
    assert.equal(listener.status, 200);

    const replay = await request(service, 'POST', `/services/${svc.service_id}/upgrade`, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': `up-${svc.service_id}` },
    });
    assert.equal(replay.status, 200);
    assert.equal(replay.body.idempotent_replay, true);
  });

  test('usage counts the bytes the listeners actually received', async () => {
    const svc = await stream({ duration_hours: 0.05, max_listeners: 3, bitrate_kbps: 64 });
    source(svc.broadcast_url);
    const a = await listen(svc.stream_url);
    const b = await listen(svc.stream_url);
    // Four seconds of the stream each (64 kbps); Icecast's burst at connect may bring the first of it at once.
    const fourSeconds = (64_000 / 8) * 4;
    await waitFor('4 s of audio for each', () => [a, b].every((l) => l.received().length >= fourSeconds), 20_000);
    a.close();
    b.close();
    await Promise.all([a.ended, b.ended]);
    const received = a.received().length + b.received().length;
    // Icecast counts what it wrote; what was still in the sockets (its own and the front door's) when the listeners
    // closed was not read: up to a second of the stream each on a loaded machine (as in metering-service.test.ts).
    const inFlight = 2 * (64_000 / 8);
    const matches = (sent: number) => sent >= received - 6000 && sent <= received + inFlight;
    const measured = await waitFor(
      'usage to catch up',
      async () => {
        const u = await usage(svc.service_id);
        // Icecast refreshes what it read from the source every few seconds: the listeners may have had theirs first.
        const caughtUp = matches(u.bytes.sent_to_listeners) && u.bytes.read_from_source > 0;
        return caughtUp ? u : undefined;
      },
      20_000,
    ).catch(async (error: Error) => {
      console.log(`# usage did not catch up: ${error.message}`);
      return usage(svc.service_id);
    });
    assert.ok(
      matches(measured.bytes.sent_to_listeners),
      `usage ${measured.bytes.sent_to_listeners} B vs received ${received} B`,
    );
    assert.ok(measured.bytes.read_from_source > 0);
    assert.equal(measured.source.connected, true);
    assert.ok(measured.listeners.peak >= 2);
  });

  test('an idle service: its row is left alone, its measured_at stays current; a listened one is written', async () => {
    const svc = await stream({ duration_hours: 0.05, max_listeners: 2, bitrate_kbps: 64 });
    await workerPasses(svc.service_id, 1);
    // The row's version: a pass that rewrote the row (each pass did, for every live service) makes a new one.
    const rowVersion = async () =>
      (await db.query('SELECT xmin::text AS version, usage FROM services WHERE id = $1', [svc.service_id])).rows[0];
    const idle = await rowVersion();
    await workerPasses(svc.service_id, 3);
    const shown = await usage(svc.service_id);
    assert.ok(Date.parse(shown.measured_at) > Date.parse(idle.usage.measured_at), 'the document shows the last pass');
    assert.deepEqual(await rowVersion(), idle, 'three passes over an idle service left its row alone');

    source(svc.broadcast_url);
    await listen(svc.stream_url);
    const used = await waitFor(
      'the usage of a listened service to be written',
      async () => {
        const u = await usage(svc.service_id);
        return u.listeners.current >= 1 && u.source.connected && u.bytes.sent_to_listeners > 0 ? u : undefined;
      },
      30_000,
    );
    const written = await rowVersion();
    assert.notEqual(written.version, idle.version);
    assert.equal(written.usage.source_connected, true, `its row has the usage shown (${JSON.stringify(used)})`);
    assert.ok(Date.parse(written.usage.measured_at) > Date.parse(idle.usage.measured_at));
  });

  test('a listener held on a live source: passes rewrite its row only when a total grew by a tenth, or to refresh it', async () => {
    const svc = await stream({ duration_hours: 0.05, max_listeners: 2, bitrate_kbps: 64 });
    source(svc.broadcast_url);
    const listener = await listen(svc.stream_url);
    const row = async () =>
      (await db.query('SELECT xmin::text AS version, usage FROM services WHERE id = $1', [svc.service_id])).rows[0];
    // Its row once the listener, the source, their bytes and the source's measured bitrate are all on it.
    await waitFor(
      'the usage of a held listener to be written',
      async () => {
        const u = (await row()).usage ?? {};
        return u.listeners === 1 && u.source_connected && u.bytes_sent > 0 && u.bytes_read > 0 && u.source_kbps;
      },
      30_000,
    );
    // Every pass (4 a second) measures a bit more audio sent and read: each version of the row seen over 12 passes
    // must have a total a tenth above the one before it, or come from the refresh.
    const versions = [await row()];
    for (let pass = 0; pass < 12; pass++) {
      await sleep(250);
      const r = await row();
      if (r.version !== versions.at(-1).version) versions.push(r);
    }
    const totals = ['bytes_sent', 'bytes_read', 'listener_hours'];
    for (const [i, next] of versions.slice(1).entries()) {
      const [was, is] = [versions[i].usage, next.usage];
      const grown = totals.some((k) => Number(is[k]) > Number(was[k]) * 1.1);
      const refreshed = Date.parse(is.measured_at) - Date.parse(was.measured_at) >= 30_000;
      assert.ok(grown || refreshed || is.listeners !== 1, `rewritten for nothing: ${JSON.stringify({ was, is })}`);
    }
    assert.ok(versions.length < 12, `${versions.length} versions in 12 passes`);
    const shown = await usage(svc.service_id);
    assert.ok(Date.parse(shown.measured_at) >= Date.parse(versions.at(-1).usage.measured_at), 'the last pass shows');
    listener.close();
    await listener.ended;
    // The listener's leaving is written on the next passes: its count, and its last bytes. Those are HAProxy's count of
    // what it sent the listener, which replaces what Icecast wrote for it (less what sat in HAProxy's buffers, so the
    // figure may drop a little): never less than the listener received.
    const delivered = listener.received().length;
    const left = await waitFor('the listener to leave the row', async () => {
      const r = await row();
      return r.usage.listeners === 0 && r.usage.bytes_sent >= delivered ? r : undefined;
    });
    assert.ok(left.usage.bytes_sent >= delivered, `${left.usage.bytes_sent} bytes counted, ${delivered} received`);
  });

  test('event-stream with autodj: AutoDJ fills the mount and yields to the live encoder, then takes over again', async () => {
    const svc = await stream({ duration_hours: 1, max_listeners: 5, bitrate_kbps: 64, autodj: true }, 'event-stream');
    const song = await sine({ seconds: 3, frequency: 660 }, mp3());
    assert.equal(
      (
        await request(service, 'PUT', `/services/${svc.service_id}/files/fill.mp3`, {
          rawBody: song,
          headers: { 'content-type': 'audio/mpeg' },
        })
      ).status,
      201,
    );
    const filler = await listen(svc.stream_url);
    await waitFor('AutoDJ audio', () => hasMpegFrame(filler.received()), 15_000);

    const live = source(svc.broadcast_url);
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(live.exitCode, null, 'the live encoder got the mount and keeps it');
    const onLive = await listen(svc.stream_url);
    await waitFor('live audio', () => hasMpegFrame(onLive.received()), 10_000);

    live.kill('SIGKILL');
    const back = await listen(svc.stream_url);
    await waitFor('AutoDJ audio again', () => hasMpegFrame(back.received()) && back.received().length > 8000, 20_000);
  });
});

// Alone, after the others: it kills the Icecast every service streams through.
describe('service life cycle: Icecast restarts', () => {
  test('AutoDJ plays an uploaded file; after Icecast is killed the mount comes back', async () => {
    const svc = await stream({ duration_hours: 1, bitrate_kbps: 64, storage_mb: 5 }, 'temporary-autodj');
    const song = await sine({ seconds: 4, frequency: 660, tags: { title: 'Loop' } }, mp3());
    const upload = await request(service, 'PUT', `/services/${svc.service_id}/files/loop.mp3`, {
      rawBody: song,
      headers: { 'content-type': 'audio/mpeg' },
    });
    assert.equal(upload.status, 201);
    const listener = await listen(svc.stream_url);
    await waitFor(
      'AutoDJ audio',
      () => hasMpegFrame(listener.received()) && listener.received().length > 16_000,
      15_000,
    );

    const icecast = spawnSync('pgrep', ['-f', `icecast2 -c ${join(service.dataDir, 'icecast')}`])
      .stdout.toString()
      .trim()
      .split('\n')
      .filter(Boolean);
    assert.ok(icecast.length > 0, 'found the Icecast process');
    for (const pid of icecast) process.kill(Number(pid), 'SIGKILL');
    await Promise.race([listener.ended, sleep(5000, undefined, { ref: false })]);
    const back = await listen(svc.stream_url);
    await waitFor(
      'AutoDJ audio after the restart',
      () => hasMpegFrame(back.received()) && back.received().length > 8000,
      20_000,
    );
  });
});
