import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  mp3EncoderArgs,
  MountMeter,
  SourceBudget,
  type MountStats,
  type SourceBudgetReading,
} from '../src/provisioning/index.js';
import { requireStreamingTools } from './support/system-tools.js';
import { sine } from './support/tones.js';

const T = Date.parse('2026-11-23T12:00:00Z');
const KBPS = 32;
const BOUGHT = (KBPS * 1000) / 8; // 4000 B/s

/**
 * Drives a budget the way the life-cycle worker does: the meter's cumulative bytes read, refreshed by Icecast every
 * 5 s, observed every second. `rate(s)` is what the source sends during second s (0 while disconnected).
 */
function drive(
  budget: SourceBudget,
  rate: (s: number) => number,
  seconds: number,
  from = 0,
  total = { bytes: 0, seen: 0 },
) {
  const readings: Array<SourceBudgetReading & { second: number }> = [];
  for (let s = from; s < from + seconds; s++) {
    total.bytes += rate(s);
    if ((s + 1) % 5 === 0) total.seen = total.bytes;
    readings.push({ ...budget.observe('svc', KBPS, total.seen, T + (s + 1) * 1000), second: s + 1 });
  }
  return readings;
}
const firstOver = (readings: Array<{ over: boolean; second: number }>) => readings.find((r) => r.over)?.second;

describe('source bitrate budget', () => {
  it('never cuts a source at the bought bitrate, with framing overhead and a burst at connect', () => {
    const budget = new SourceBudget();
    // 10 s of audio at once when connecting (an encoder's buffer), then 1 % over for an hour.
    const readings = drive(budget, (s) => (s === 0 ? 10 * BOUGHT : BOUGHT * 1.01), 3600);
    assert.equal(firstOver(readings), undefined);
    assert.ok(Math.min(...readings.map((r) => r.level)) > 0.4 * budget.capacity(KBPS));
  });

  it('cuts a source at 1.5× within the window divided by the excess', () => {
    const budget = new SourceBudget();
    const at = firstOver(drive(budget, () => BOUGHT * 1.5, 600));
    // 30 s of capacity drained at 0.4 × 4000 B/s: 75 s; Icecast reports in 5 s steps, which charge a little earlier.
    assert.ok(at !== undefined && at >= 60 && at <= 80, `cut after ${at} s`);
  });

  it('cuts the alternating pattern: 4 s at 480 kbps, 11 s at 12 kbps (4.2× on average)', () => {
    const budget = new SourceBudget();
    const at = firstOver(drive(budget, (s) => (s % 15 < 4 ? 60_000 : 1500), 120));
    assert.ok(at !== undefined && at <= 25, `cut after ${at} s`);
  });

  it('cuts back-to-back 8 s sessions at 320 kbps, and keeps the source out until half the bucket is back', () => {
    const budget = new SourceBudget();
    // Sessions of 8 s with 1 s between them; the meter's total keeps growing across them.
    const readings = drive(budget, (s) => (s % 9 < 8 ? 40_000 : 0), 45);
    const at = firstOver(readings);
    assert.ok(at !== undefined && at <= 10, `cut after ${at} s`);
    const cut = readings.find((r) => r.over)!;
    assert.ok(cut.refusedUntil! > T + at! * 1000);

    // Disconnected from then on: refused until the bucket holds half its capacity again, then let back.
    const quiet = new SourceBudget();
    const total = { bytes: 0, seen: 0 };
    const first = drive(quiet, (s) => (s < 8 ? 40_000 : 0), 10, 0, total);
    // What was read until the disconnect is charged too (counted at the next refresh).
    const until = first.at(-1)!.refusedUntil!;
    const after = drive(quiet, () => 0, 120, 10, total);
    const back = after.find((r) => !r.over)!;
    assert.ok(
      Math.abs(T + back.second * 1000 - until) <= 1000,
      `let back at ${back.second} s, promised ${(until - T) / 1000} s`,
    );
    assert.ok(back.level >= quiet.capacity(KBPS) * 0.5);
  });

  it('does not cut a source at the bought bitrate after a stall of the host longer than the window', () => {
    // Icecast stalls for `gap` seconds from second 60: it neither reads the source (its audio waits in the sockets)
    // nor answers its stats. When it wakes it reads the backlog at once, but counts it only at its next 5 s refresh:
    // the first reading after the stall still shows the old total. The meter names the stall (its last reading before,
    // its first after).
    const afterStall = (rate: number, gap: number, named = true) => {
      const budget = new SourceBudget();
      const readings: SourceBudgetReading[] = [];
      let reading = { bytes: 0, at: T };
      let counted = 0;
      const stallEnd = 60 + gap;
      for (let s = 1; s <= 300; s++) {
        const stalled = s > 60 && s <= stallEnd;
        if (!stalled && s % 5 === 0) counted = s * rate;
        if (!stalled) reading = { bytes: s === stallEnd + 1 ? reading.bytes : counted, at: T + s * 1000 };
        const stall = named && s > stallEnd ? { from: T + 60_000, to: T + (stallEnd + 1) * 1000 } : undefined;
        readings.push(budget.observe('svc', KBPS, reading.bytes, reading.at, { stall }));
      }
      return readings;
    };
    for (const gap of [40, 120]) {
      assert.equal(
        afterStall(BOUGHT * 1.01, gap).find((r) => r.over),
        undefined,
        `a source at 1 % over its bitrate was cut after a ${gap} s stall`,
      );
      assert.ok(
        afterStall(BOUGHT * 1.5, gap).some((r) => r.over),
        `a source at 1.5× was not cut (${gap} s stall)`,
      );
      // Not named (a host that never stalled does not credit anything): the same backlog is over the window.
      assert.ok(
        afterStall(BOUGHT * 1.01, gap, false).some((r) => r.over),
        `${gap} s backlog without a stall`,
      );
    }
    // The credit lasts one window: a source that sent nothing during the stall cannot spend it later.
    const budget = new SourceBudget();
    const stall = { from: T, to: T + 120_000 };
    budget.observe('svc', KBPS, 0, T);
    const credited = budget.observe('svc', KBPS, 0, T + 120_000, { stall });
    assert.ok(credited.level > budget.capacity(KBPS), 'the stall is credited');
    const later = budget.observe('svc', KBPS, 0, T + 120_000 + (budget.windowSeconds + 1) * 1000, { stall });
    assert.equal(later.level, budget.capacity(KBPS));
    assert.equal(later.stallCredit, undefined);
  });

  it('carries on from a saved state (a restart does not refill the bucket)', () => {
    const budget = new SourceBudget();
    const readings = drive(budget, () => 40_000, 10);
    const last = readings.at(-1)!;
    assert.equal(last.over, true);
    const saved = JSON.parse(
      JSON.stringify({ level: last.level, bytesRead: last.bytesRead, at: last.at, over: last.over }),
    );
    const restarted = new SourceBudget();
    const next = restarted.observe('svc', KBPS, last.bytesRead, last.at + 1000, { restored: saved });
    assert.equal(next.over, true);
    assert.ok(next.level < 0.5 * restarted.capacity(KBPS));
    // Without it, a fresh bucket.
    assert.equal(new SourceBudget().observe('svc', KBPS, last.bytesRead, last.at + 1000).over, false);
  });
});

describe('mount meter: the end of a source session', () => {
  /** A source reading `rate` B/s from `start` to `end` (ms); Icecast refreshes at start + 5 k s; polls every 250 ms. */
  function session(meter: MountMeter, mount: string, rate: number, start: number, end: number, pollUntil: number) {
    for (let at = start + 100; at <= pollUntil; at += 250) {
      if (at >= end) {
        meter.observeStats([], at);
        continue;
      }
      const refreshed = start + Math.floor((at - start - 100) / 5000) * 5000 + 100;
      const bytes = Math.round(((refreshed - start) / 1000) * rate);
      const stats: MountStats = {
        mount,
        listeners: 0,
        listenerPeak: 0,
        totalBytesRead: bytes,
        totalBytesSent: 0,
        streamStart: new Date(start),
        maxListeners: null,
        sourceIp: null,
      };
      meter.observeStats([stats], at);
    }
  }

  it('adds what a session read after its last refresh, within 2 %', () => {
    const meter = new MountMeter();
    session(meter, '/a', 8000, T, T + 13_300, T + 15_000);
    const s = meter.snapshot('/a')!;
    assert.equal(s.sourceConnected, false);
    assert.ok(
      Math.abs(s.bytesRead - 13.3 * 8000) / (13.3 * 8000) < 0.02,
      `bytesRead ${s.bytesRead} for ${13.3 * 8000}`,
    );
    assert.ok(s.bytesReadEstimated > 0 && s.bytesReadEstimated < 5.5 * 8000);
    // Counted once: more polls without the source change nothing.
    meter.observeStats([], T + 20_000);
    assert.equal(meter.snapshot('/a')!.bytesRead, s.bytesRead);

    // A second session, noticed only as a new stream_start (no poll saw the mount gone), is closed the same way.
    session(meter, '/a', 8000, T + 21_000, T + 38_700, T + 38_600);
    session(meter, '/a', 8000, T + 39_000, T + 45_000, T + 44_400);
    const total = meter.snapshot('/a')!.bytesRead;
    const expected = (13.3 + 17.7) * 8000 + 5 * 8000; // the third session so far: its refresh at 5 s
    assert.ok(Math.abs(total - expected) / expected < 0.02, `bytesRead ${total} for ${expected}`);
  });
});

requireStreamingTools(['ffmpeg']);
describe('MP3 encoder settings', () => {
  it('encode 16, 24, 32 and 128 kbps at what was bought (the AutoDJ and relays use them)', async () => {
    for (const kbps of [16, 24, 32, 128]) {
      const out = await sine({ seconds: 20 }, [...mp3EncoderArgs(kbps), '-f', 'mp3']);
      const measured = (out.length * 8) / 20 / 1000;
      assert.ok(measured >= kbps && measured <= kbps * 1.03, `${kbps} kbps asked, ${measured} kbps sent`);
    }
  });
});
