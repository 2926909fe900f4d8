// The proxy's exact count of a source connection as the meter's final figure for its session (MountMeter.sourceEnded).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MountMeter, type MountStats } from '../src/provisioning/index.js';
import { sourceMountOf } from '../src/provisioning/source-end.js';

const T = Date.parse('2026-01-01T00:00:00Z');
const stat = (totalBytesRead: number, streamStart: number): MountStats => ({
  mount: '/a.mp3',
  listeners: 0,
  listenerPeak: 0,
  maxListeners: null,
  totalBytesSent: 0,
  totalBytesRead,
  streamStart: new Date(streamStart),
  sourceIp: '127.0.0.1',
});
const read = (meter: MountMeter) => meter.snapshot('/a.mp3')!;

describe('source usage from the proxy', () => {
  test('an exact end reported while Icecast still lists the source is the session total', () => {
    const meter = new MountMeter();
    meter.observeStats([stat(0, T)], T + 500);
    meter.observeStats([stat(40_000, T)], T + 5600); // refreshed at T + 5 s
    meter.sourceEnded({ mount: '/a.mp3', bytes: 63_211, openedAt: T - 300, closedAt: T + 7900 });
    assert.equal(read(meter).bytesRead, 40_000, 'Icecast figures until the source is gone');
    meter.observeStats([], T + 8100);
    assert.equal(read(meter).bytesRead, 63_211);
    assert.equal(read(meter).bytesReadEstimated, 0);
  });

  test('an exact end reported after the poll that found the source gone replaces the estimate', () => {
    const meter = new MountMeter();
    meter.observeStats([stat(0, T)], T + 500);
    meter.observeStats([stat(40_000, T)], T + 5600);
    meter.observeStats([], T + 8100);
    const estimated = read(meter);
    assert.ok(estimated.bytesReadEstimated > 0 && estimated.bytesRead !== 63_211);
    meter.sourceEnded({ mount: '/a.mp3', bytes: 63_211, openedAt: T - 300, closedAt: T + 7900 });
    assert.equal(read(meter).bytesRead, 63_211);
    assert.equal(read(meter).bytesReadEstimated, 0);
    // Reported twice (a datagram repeated): counted once.
    meter.sourceEnded({ mount: '/a.mp3', bytes: 63_211, openedAt: T - 300, closedAt: T + 7900 });
    assert.equal(read(meter).bytesRead, 63_211);
  });

  test('sessions add up across reconnects, and an end is never applied to the session after it', () => {
    const meter = new MountMeter();
    meter.observeStats([stat(0, T)], T + 500);
    meter.observeStats([stat(40_000, T)], T + 5600);
    // The source reconnects within a second: the next poll sees the new session before the old one's end arrives.
    const second = T + 8000;
    meter.observeStats([stat(0, second)], second + 200);
    meter.sourceEnded({ mount: '/a.mp3', bytes: 50_000, openedAt: T - 300, closedAt: second - 100 });
    // Too late for the old session, and not the new one's (accepted long before it started): the estimate stands.
    const afterOld = read(meter).bytesRead;
    meter.observeStats([stat(30_000, second)], second + 5500);
    meter.sourceEnded({ mount: '/a.mp3', bytes: 31_000, openedAt: second - 400, closedAt: second + 6000 });
    meter.observeStats([], second + 6300);
    assert.equal(read(meter).bytesRead, afterOld + 31_000);
    assert.equal(read(meter).sourceSessions, 2);
  });

  test('an end reported before the meter saw its session waits for the poll that closes it; a stray end is dropped', () => {
    const meter = new MountMeter();
    meter.sourceEnded({ mount: '/a.mp3', bytes: 999, openedAt: T - 60_000, closedAt: T - 59_000 }); // refused long ago
    meter.observeStats([stat(0, T)], T + 500);
    meter.sourceEnded({ mount: '/b.mp3', bytes: 5, openedAt: T, closedAt: T + 1 });
    meter.observeStats([stat(12_000, T)], T + 5300);
    meter.observeStats([], T + 6000);
    const estimated = read(meter).bytesRead;
    assert.ok(estimated > 12_000, 'the stray end did not replace the estimate');
    // The state survives a restart with the exact figure applied later.
    const restored = new MountMeter({ state: JSON.parse(JSON.stringify(meter.toJSON())) });
    restored.sourceEnded({ mount: '/a.mp3', bytes: 14_500, openedAt: T - 200, closedAt: T + 5800 });
    assert.equal(restored.snapshot('/a.mp3')!.bytesRead, 14_500);
    // A short session whose end comes before any poll saw it: applied when the poll that closes it comes.
    const next = T + 10_000;
    restored.sourceEnded({ mount: '/a.mp3', bytes: 9_100, openedAt: next - 300, closedAt: next + 2000 });
    restored.observeStats([stat(8_000, next)], next + 2100);
    restored.observeStats([], next + 2600);
    assert.equal(restored.snapshot('/a.mp3')!.bytesRead, 14_500 + 9_100);
  });

  test('the mount of a source request', () => {
    assert.equal(sourceMountOf('PUT /a.mp3?x=1 HTTP/1.1\r\nHost: h'), '/a.mp3');
    assert.equal(sourceMountOf('SOURCE /b HTTP/1.0'), '/b');
    assert.equal(sourceMountOf('GET /a.mp3 HTTP/1.1\r\n'), undefined);
    assert.equal(sourceMountOf('PUT /admin/metadata HTTP/1.1\r\n'), undefined);
  });
});
