// Behind HAProxy a finished listener is counted with the bytes HAProxy sent it (its end-of-connection line), not with
// what Icecast wrote to HAProxy: the meter waits a few seconds for that report, in memory and in its saved state.
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MountMeter, type MountStats } from '../src/provisioning/index.js';
import { reportedByProxy } from '../src/provisioning/listener-end.js';

const T = Date.parse('2026-11-29T06:00:00Z');
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'listener-bytes-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const stats = (sent: number, listeners = 1): MountStats[] => [
  {
    mount: '/m',
    listeners,
    listenerPeak: 1,
    maxListeners: null,
    totalBytesSent: sent,
    totalBytesRead: 100_000,
    streamStart: new Date(T),
    sourceIp: '127.0.0.1',
  },
];

/** An access-log line as Icecast 2.4.4 writes it for a listener that left. */
const line = (user: string, bytes: number, agent = 'player') =>
  `127.0.0.1 - ${user} [29/Nov/2026:06:00:30 +0000] "GET /m HTTP/1.1" 200 ${bytes} "-" "${agent}" 20\n`;

/** A meter over its own access log, polled at the times a test sets. */
async function meterAt(name: string, mountStats = stats(500_000)) {
  const path = join(dir, `${name}.log`);
  await writeFile(path, '');
  const clock = { now: T + 30_000 };
  const admin = { stats: async () => mountStats, listClients: async () => [] };
  const options = { admin, accessLogPath: path, reportedByProxy, now: () => clock.now, listClients: false };
  const meter = new MountMeter(options);
  const poll = async (at: number, m = meter) => {
    clock.now = at;
    return m.poll();
  };
  return { meter, options, clock, poll, write: (text: string) => appendFile(path, text) };
}

describe("a listener's bytes sent, behind HAProxy", () => {
  test("its line waits for HAProxy's count and is counted with it; a count that came first is used at once", async () => {
    const { meter, poll, write } = await meterAt('wait');
    await write(line('proxy-a', 90_000));
    let p = await poll(T + 30_000);
    assert.deepEqual(p.entries, [], 'held until HAProxy reports');
    assert.equal(meter.snapshot('/m')!.finishedListenerBytes, 0);
    meter.listenerEnded({ user: 'proxy-a', bytes: 41_000 });
    p = await poll(T + 30_250);
    assert.deepEqual(
      p.entries.map((e) => [e.user, e.bytes]),
      [['proxy-a', 41_000]],
    );
    // Reported before Icecast wrote its line.
    meter.listenerEnded({ user: 'proxy-b', bytes: 7_000 });
    await write(line('proxy-b', 60_000));
    p = await poll(T + 30_500);
    assert.deepEqual(
      p.entries.map((e) => [e.user, e.bytes]),
      [['proxy-b', 7_000]],
    );
    const s = meter.snapshot('/m')!;
    assert.deepEqual([s.finishedListeners, s.finishedListenerBytes], [2, 48_000]);
    // The connected listeners' share of Icecast's counter is less what Icecast wrote for the finished ones.
    assert.equal(s.bytesSent, 48_000 + (500_000 - 90_000 - 60_000));
  });

  test("the only listener left: while its line waits for HAProxy's count, what Icecast wrote for it still counts", async () => {
    const { meter, poll, write } = await meterAt('gone', stats(90_000, 0));
    await write(line('proxy-only', 90_000));
    await poll(T + 30_000);
    assert.equal(meter.snapshot('/m')!.bytesSent, 90_000, 'not dropped to nothing while held');
    meter.listenerEnded({ user: 'proxy-only', bytes: 88_500 });
    await poll(T + 30_250);
    assert.equal(meter.snapshot('/m')!.bytesSent, 88_500, "then HAProxy's exact count");
  });

  test("without a report the line counts with Icecast's figure after 5 s; other listeners never wait", async () => {
    const { meter, poll, write } = await meterAt('lost');
    await write(line('proxy-lost', 30_000) + line('front-door-1', 20_000) + line('-', 10_000));
    let p = await poll(T + 30_000);
    assert.deepEqual(
      p.entries.map((e) => e.bytes),
      [20_000, 10_000],
    );
    p = await poll(T + 34_000);
    assert.deepEqual(p.entries, []);
    p = await poll(T + 35_001);
    assert.deepEqual(
      p.entries.map((e) => [e.user, e.bytes]),
      [['proxy-lost', 30_000]],
    );
    assert.equal(meter.snapshot('/m')!.finishedListenerBytes, 60_000);
  });

  test("Icecast's line of a listener on a mount without authentication names its ticket before its agent", async () => {
    const { meter, poll, write } = await meterAt('agent');
    const ticket = 'proxy-0b6f5c1e-2d3a-4f5b-8c7d-9e0f1a2b3c4d';
    await write(line('-', 80_000, `${ticket} VLC/3.0.18 LibVLC/3.0.18`) + line('-', 5_000, 'proxy-x player'));
    let p = await poll(T + 30_000);
    assert.deepEqual(
      p.entries.map((e) => [e.user, e.userAgent, e.bytes]),
      [[null, 'proxy-x player', 5_000]],
      "only a ticket's exact shape is one",
    );
    meter.listenerEnded({ user: ticket, bytes: 64_000 });
    p = await poll(T + 30_250);
    assert.deepEqual(
      p.entries.map((e) => [e.user, e.userAgent, e.bytes]),
      [[ticket, 'VLC/3.0.18 LibVLC/3.0.18', 64_000]],
    );
  });

  test('a held line is kept in the saved state, with the log position past it', async () => {
    const { meter, options, poll, write } = await meterAt('saved');
    await write(line('proxy-c', 50_000, 'saved'));
    await poll(T + 30_000);
    const state = JSON.parse(JSON.stringify(meter.toJSON()));
    assert.equal(state.held.length, 1);
    const restored = new MountMeter({ ...options, state });
    restored.listenerEnded({ user: 'proxy-c', bytes: 12_345 });
    const p = await poll(T + 31_000, restored);
    assert.deepEqual(
      p.entries.map((e) => [e.user, e.bytes, e.userAgent, e.endedAt.toISOString()]),
      [['proxy-c', 12_345, 'saved', '2026-11-29T06:00:30.000Z']],
    );
    assert.equal(restored.snapshot('/m')!.finishedListenerBytes, 12_345);
    assert.equal(restored.toJSON().held, undefined);
  });
});
