// Bitrate budget and exact usage through the running service: real HTTP, PostgreSQL, chain, Icecast and ffmpeg.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { expireIn } from './support/expiry.js';
import { buy } from './support/purchase.js';
import { request, type Service } from './support/service.js';
import { shortLivedCatalog, startShortLivedService } from './support/short-catalog.js';
import { exitOf, rawListener, waitFor, type RawListener } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { liveSine } from './support/tones.js';
import { buyerWallet } from './support/dev-file.js';

requireStreamingTools();
/**
 * Shorter than the default 30 s, so the 1.5× source is cut sooner; stricter for the compliant ones. Icecast counts the
 * bytes read in 5 s steps: each step takes 5 s of the window at once, and a compliant source must keep over half.
 */
const WINDOW_SECONDS = 15;

let service: Service;
let wallet: TestWallet;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
const processes: ChildProcess[] = [];
const cleanups: Array<() => void> = [];

before(async () => {
  ({ catalog, service } = await startShortLivedService({ SOURCE_BITRATE_WINDOW_SECONDS: String(WINDOW_SECONDS) }));
  wallet = await buyerWallet(service);
});
after(async () => {
  for (const c of cleanups) c();
  for (const p of processes) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  await service?.stop();
  await catalog?.remove();
});

interface Bought {
  service_id: string;
  stream_url: string;
  broadcast_url: string;
  endpoints: Record<string, string>;
}
const stream = (parameters: Record<string, unknown>) =>
  buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: 'Meter FM',
    parameters,
  }).then((r) => {
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.service as Bought;
  });
const usage = async (id: string) => (await request(service, 'GET', `/services/${id}/usage`)).body.usage;
const record = async (id: string) => (await request(service, 'GET', `/services/${id}`)).body;

/** ffmpeg encoding a sine to MP3 in real time; `extra` goes before the output (e.g. ['-t', '8']). */
function encoder(
  url: string,
  kbps: number,
  extra: string[] = [],
  sampleRate = kbps < 32 ? 22050 : 44100,
): ChildProcess {
  const child = liveSine(url, { kbps, sampleRate, beforeCodec: extra });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-2000);
  });
  sourceErrors.set(child, () => stderr);
  processes.push(child);
  return child;
}
const sourceErrors = new WeakMap<ChildProcess, () => string>();

/** A counting listener once the mount is live; if the source ends before, what it printed says why. */
async function listenWhenLive(svc: Bought, source: ChildProcess): Promise<RawListener> {
  return waitFor(
    'the mount to go live',
    async () => {
      if (!running(source)) {
        const record = (await request(service, 'GET', `/services/${svc.service_id}`)).body;
        throw new Error(
          `the source ended (${source.exitCode ?? source.signalCode}) before its mount was live: ` +
            `${sourceErrors.get(source)?.()}; the service: ${JSON.stringify(record.service)}`,
        );
      }
      // Kept or closed by its answer, not by a guess at how soon it comes: a listener closed before a late 200 was
      // still sent Icecast's burst, which counts as sent to listeners (tens of KB when the host is slow to answer).
      const l = await listenTo(svc.stream_url).catch(() => undefined);
      const status = l && (await waitFor('an answer', () => l.status() || undefined, 5_000).catch(() => 0));
      if (status === 200) return l;
      l?.close();
      await sleep(300);
      return undefined;
    },
    20_000,
  );
}
const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

const budgetSuite = () =>
  describe('source bitrate budget', () => {
    test('compliant sources keep streaming; 1.5× and reconnecting abusers are cut, and a cut source is refused', {
      timeout: 240_000,
    }, async () => {
      const [fair, fairLow, greedy, hopper] = await Promise.all([
        stream({ duration_hours: 0.2, max_listeners: 2, bitrate_kbps: 32 }),
        stream({ duration_hours: 0.2, max_listeners: 2, bitrate_kbps: 16 }),
        stream({ duration_hours: 0.2, max_listeners: 2, bitrate_kbps: 32 }),
        stream({ duration_hours: 0.2, max_listeners: 2, bitrate_kbps: 32 }),
      ]);
      assert.match(fairLow.endpoints.encoder_example, /-b:a 16k -ar 22050/);
      assert.match(fairLow.endpoints.encoder_note, /24 kHz or lower/);
      const started = Date.now();
      const fairSource = encoder(fair.broadcast_url, 32);
      const fairLowSource = encoder(fairLow.broadcast_url, 16);
      const greedySource = encoder(greedy.broadcast_url, 48);

      // Back-to-back 8 s sessions at 320 kbps (10×) until the mount refuses one.
      let sessions = 0;
      const hops: string[] = [];
      let refusedAfter: number | undefined;
      let whenRefused: any;
      const hopping = (async () => {
        while (Date.now() - started < 120_000) {
          sessions++;
          const began = Date.now();
          const code = await exitOf(encoder(hopper.broadcast_url, 320, ['-t', '8']), 30_000);
          const lasted = Date.now() - began;
          hops.push(`${code}/${lasted} ms`);
          if (code !== 0 && lasted < 3000) {
            refusedAfter = sessions;
            whenRefused = await usage(hopper.service_id);
            return;
          }
        }
      })();

      const greedyExit = exitOf(greedySource, 150_000);
      assert.notEqual(await greedyExit, null, 'the 1.5× source was disconnected');
      const greedyCutAfter = Date.now() - started;
      await hopping;
      const greedyUsage = await usage(greedy.service_id);
      const hopperUsage = whenRefused;
      const hopperRecord = await record(hopper.service_id);
      console.log(
        `budget: 48 kbps on 32 cut after ${greedyCutAfter} ms (window ${WINDOW_SECONDS} s); 320 kbps 8 s sessions refused at session ${refusedAfter} (exit/lasted: ${hops.join(', ')}); ` +
          `hopper budget ${JSON.stringify(hopperUsage.source.bitrate_budget)}`,
      );

      // Bounded: the window's worth drained at (1.5 − 1.1) × the bought rate, plus Icecast's 5 s refresh and the passes.
      assert.ok(greedyCutAfter < (WINDOW_SECONDS / 0.4 + 30) * 1000, `cut after ${greedyCutAfter} ms`);
      const over = new RegExp(`more than the 32 kbps bought, on average over ${WINDOW_SECONDS} s`);
      assert.match((await record(greedy.service_id)).status_reason, over);
      assert.ok(greedyUsage.events.some((e: any) => e.code === 'source_over_bitrate'));

      assert.ok(
        refusedAfter !== undefined && refusedAfter <= 3,
        `the reconnecting source was refused at session ${refusedAfter}`,
      );
      assert.ok(
        hopperUsage.events.some((e: any) => e.code === 'source_over_bitrate'),
        'the reconnecting source was cut',
      );
      assert.ok(
        hopperUsage.source.bitrate_budget.remaining_bytes < hopperUsage.source.bitrate_budget.capacity_bytes / 2,
      );
      assert.ok(
        Date.parse(hopperUsage.source.bitrate_budget.refused_until) > Date.parse(hopperUsage.measured_at),
        'refused for a while',
      );
      assert.equal(hopperRecord.service.status, 'active');

      // The compliant ones (32 kbps at 44.1 kHz, 16 kbps at 22.05 kHz) were never cut, for well over a window.
      await sleep(Math.max(0, WINDOW_SECONDS * 3000 - (Date.now() - started)));
      assert.ok(running(fairSource), 'the 32 kbps source still streams');
      assert.ok(running(fairLowSource), 'the 16 kbps source still streams');
      for (const svc of [fair, fairLow]) {
        const u = await usage(svc.service_id);
        assert.ok(!u.events.some((e: any) => e.code === 'source_over_bitrate'), JSON.stringify(u.events));
        assert.equal(u.source.connected, true);
        assert.ok(
          u.source.bitrate_budget.remaining_bytes > u.source.bitrate_budget.capacity_bytes / 2,
          JSON.stringify(u.source),
        );
      }
      fairSource.kill('SIGKILL');
      fairLowSource.kill('SIGKILL');
    });

    test('/products tells how to send 16 and 24 kbps', async () => {
      const products = (await request(service, 'GET', '/products', { auth: false })).body;
      const text = JSON.stringify(products);
      assert.match(text, /16 and 24 kbps need a sample rate of 24 kHz or lower, e.g. ffmpeg -ar 22050/);
    });
  });

/** A TCP relay in front of Icecast counting the bytes the encoder sends after its request headers. */
async function countingRelay(
  icecastPort: number,
): Promise<{ port: number; bodyBytes: () => number; close: () => void }> {
  let body = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(icecastPort, '127.0.0.1');
    let head: Buffer | null = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      if (head) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end === -1) return;
        body += head.length - end - 4;
        head = null;
        return;
      }
      body += chunk.length;
    });
    client.pipe(upstream).pipe(client);
    // Either side going away ends both, as a direct connection would.
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => server.close();
  cleanups.push(close);
  return { port: (server.address() as net.AddressInfo).port, bodyBytes: () => body, close };
}

/** A counting listener on a stream URL, closed with the test. */
async function listenTo(url: string): Promise<RawListener> {
  const { port, pathname } = new URL(url);
  const listener = await rawListener(Number(port), pathname, 'counting-listener');
  cleanups.push(() => listener.close());
  return listener;
}

/** The access-log lines of the stream's listeners, to tell which connection a difference came from. */
async function listenerLines(svc: Bought): Promise<string> {
  const log = await readFile(join(service.dataDir, 'icecast', 'access.log'), 'utf8').catch(() => '');
  const path = new URL(svc.stream_url).pathname;
  return `\n${log
    .split('\n')
    .filter((line) => line.includes(`GET ${path} `))
    .join('\n')}`;
}

/** Two seconds of a 64 kbps stream: what a loaded machine was seen to hold in the sockets from Icecast to a listener. */
const IN_SOCKETS_ALLOWANCE = 2 * (64_000 / 8);
const within = (measured: number, truth: number, share: number) => Math.abs(measured - truth) <= truth * share;

const exactUsageSuite = () =>
  describe('usage is exact once connections close', () => {
    test('bytes sent to a listener and read from the source match what they counted, and listeners.current drops at once', {
      timeout: 150_000,
    }, async () => {
      const svc = await stream({ duration_hours: 0.1, max_listeners: 2, bitrate_kbps: 64 });
      const icecast = new URL(svc.stream_url);
      const relay = await countingRelay(Number(icecast.port));
      const broadcast = new URL(svc.broadcast_url);
      broadcast.port = String(relay.port);
      const source = encoder(broadcast.href, 64);
      const listener = await listenWhenLive(svc, source);
      await waitFor(
        'the listener to be metered',
        async () => (await usage(svc.service_id)).listeners.current === 1,
        10_000,
      );
      // Long enough for several of Icecast's 5 s refreshes; the stream ends between two of them.
      await sleep(25_300);
      const received = listener.close();
      const closedAt = Date.now();
      await waitFor(
        'listeners.current to drop',
        async () => (await usage(svc.service_id)).listeners.current === 0,
        10_000,
      );
      const droppedAfter = Date.now() - closedAt;
      await sleep(6_700);
      source.kill('SIGINT');
      await exitOf(source, 10_000);
      await waitFor(
        'the source to be gone',
        async () => (await usage(svc.service_id)).source.connected === false,
        10_000,
      );
      await sleep(1500); // a few passes, for the last access-log line
      const sent = relay.bodyBytes();
      const u = await usage(svc.service_id);
      console.log(
        `usage: listener received ${received}, usage ${u.bytes.sent_to_listeners}; source sent ${sent}, usage ${u.bytes.read_from_source}; ` +
          `listeners.current 0 after ${droppedAfter} ms`,
      );
      assert.ok(droppedAfter <= 2000, `listeners.current dropped after ${droppedAfter} ms`);
      // The listener counts what it had read when it closed; Icecast counts what it wrote, which includes what was still
      // in the sockets between them at the close (Icecast's, the front door's, the listener's): 1.9 s of this stream
      // once in CI, while other tests used both cores.
      const inFlightAllowance = IN_SOCKETS_ALLOWANCE;
      assert.ok(
        u.bytes.sent_to_listeners >= received * 0.98 &&
          u.bytes.sent_to_listeners <= received * 1.02 + inFlightAllowance,
        `sent_to_listeners ${u.bytes.sent_to_listeners} vs received ${received} (2 % + ${inFlightAllowance} bytes in flight)${await listenerLines(svc)}`,
      );
      assert.ok(
        within(u.bytes.read_from_source, sent, 0.02),
        `read_from_source ${u.bytes.read_from_source} vs sent ${sent}`,
      );
      assert.equal(u.listeners.current, 0);
    });

    test('usage after an expiry cut counts everything up to the cut', { timeout: 120_000 }, async () => {
      const svc = await stream({ duration_hours: 0.1, max_listeners: 2, bitrate_kbps: 64 });
      const relay = await countingRelay(Number(new URL(svc.stream_url).port));
      const broadcast = new URL(svc.broadcast_url);
      broadcast.port = String(relay.port);
      const source = encoder(broadcast.href, 64);
      const listener = await listenWhenLive(svc, source);
      // Bought for minutes, so that a slow start on a loaded machine cannot outlast it (0.008 h once could); once on
      // air it ends after as much of the stream as the 0.008 h left then.
      await expireIn(service, svc.service_id, 24);
      assert.notEqual(await exitOf(source, 60_000), null, 'the source was cut at expiry');
      await waitFor('the service to expire', async () => (await usage(svc.service_id)).status === 'expired', 10_000);
      await sleep(2000); // a few passes: the last access-log lines and the end of the source session
      const received = listener.received();
      const sent = relay.bodyBytes();
      const u = await usage(svc.service_id);
      console.log(
        `expiry usage: listener received ${received}, usage ${u.bytes.sent_to_listeners}; source sent ${sent}, usage ${u.bytes.read_from_source}`,
      );
      // As when the listener closes (above): Icecast counts what it wrote, the listener what it read before the cut;
      // under load up to two seconds of this stream may lie between the two (CI, the metering tests side by side).
      const inFlightAllowance = IN_SOCKETS_ALLOWANCE;
      assert.ok(
        u.bytes.sent_to_listeners >= received * 0.98 &&
          u.bytes.sent_to_listeners <= received * 1.02 + inFlightAllowance,
        `sent_to_listeners ${u.bytes.sent_to_listeners} vs received ${received} (2 % + ${inFlightAllowance} bytes in flight)${await listenerLines(svc)}`,
      );
      // The cut closes the source's connection with what the relay had written still in its sockets: Icecast counts
      // what it read, the relay what it wrote (0.7 s of this stream once, with both cores busy).
      assert.ok(
        u.bytes.read_from_source <= sent * 1.02 && u.bytes.read_from_source >= sent * 0.98 - inFlightAllowance,
        `read_from_source ${u.bytes.read_from_source} vs sent ${sent} (2 % + ${inFlightAllowance} bytes in flight)`,
      );
      assert.equal(u.listeners.current, 0);
    });
  });

// Every test here watches streams over real time (three budget windows, an expiry, counts relative to what a stream
// carried): they run side by side, not one after the other.
describe('metering through the running service', { concurrency: true }, () => {
  budgetSuite();
  exactUsageSuite();
});
