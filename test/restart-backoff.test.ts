import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { mock, test } from 'node:test';
import { RestartBackoff } from '../src/provisioning/restart-backoff.js';

/** The delays before each restart a backoff asks for, read off mocked timers: [attempt, ms since scheduled]. */
function delaysOf(backoff: RestartBackoff, schedules: number, between?: (n: number) => void): Array<[number, number]> {
  const seen: Array<[number, number]> = [];
  for (let n = 0; n < schedules; n++) {
    between?.(n);
    const scheduledAt = Date.now();
    let ran: number | undefined;
    backoff.schedule((attempt) => {
      ran = attempt;
      seen.push([attempt, Date.now() - scheduledAt]);
    });
    let waited = 0;
    while (ran === undefined && waited < 60_000) {
      mock.timers.tick(50);
      waited += 50;
    }
  }
  return seen;
}

test('a process that keeps failing is restarted further apart each time, up to the longest delay', (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.after(() => mock.timers.reset());
  const delays = delaysOf(new RestartBackoff({ min: 100, max: 1000 }), 6);
  assert.deepEqual(delays, [
    [1, 100],
    [2, 200],
    [3, 400],
    [4, 800],
    [5, 1000],
    [6, 1000],
  ]);
});

test('after a healthy run (30 s) or a reset the count starts again; a short run keeps it', (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.after(() => mock.timers.reset());
  const backoff = new RestartBackoff({ min: 100, max: 10_000 });
  const startedAt = () => Date.now();
  const runs: Record<number, () => void> = {
    // 3: the process ran 31 s before it ended; 4: it ran 5 s.
    3: () => {
      const began = startedAt();
      mock.timers.tick(31_000);
      backoff.ranSince(began);
    },
    4: () => {
      const began = startedAt();
      mock.timers.tick(5000);
      backoff.ranSince(began);
    },
    5: () => backoff.reset(),
  };
  const delays = delaysOf(backoff, 7, (n) => runs[n]?.());
  assert.deepEqual(
    delays.map(([attempt]) => attempt),
    [1, 2, 3, 1, 2, 1, 2],
  );
  assert.deepEqual(
    delays.map(([, ms]) => ms),
    [100, 200, 400, 100, 200, 100, 200],
  );
});

test('a cancelled restart never runs', (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.after(() => mock.timers.reset());
  const backoff = new RestartBackoff({ min: 100, max: 1000 });
  let ran = false;
  backoff.schedule(() => (ran = true));
  backoff.cancel();
  mock.timers.tick(5000);
  assert.equal(ran, false);
});

/** A supervised process whose starts fail `failures` times, then succeed; what it was told, in order. */
function flakyProcess(failures: number, stopDuringStart = false) {
  const events = new EventEmitter();
  const seen: string[] = [];
  let stopped = false;
  let starts = 0;
  events.on('restarted', (started) => seen.push(`restarted ${JSON.stringify(started)}`));
  events.on('restartFailed', (error: Error) => seen.push(`failed ${error.message}`));
  const supervised = {
    events,
    launch: async () => {
      starts++;
      if (stopDuringStart) stopped = true;
      if (starts <= failures) throw new Error(`start ${starts}`);
      return { pid: 100 + starts };
    },
    stop: async () => {
      seen.push('stop');
    },
    stopped: () => stopped,
  };
  return { supervised, seen, starts: () => starts, stop: () => (stopped = true) };
}

async function tickThrough(ms: number): Promise<void> {
  for (let waited = 0; waited < ms; waited += 50) {
    mock.timers.tick(50);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

test('a relaunch tries again after each failed start, with the backoff, until one starts', async (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.after(() => mock.timers.reset());
  const { supervised, seen, starts } = flakyProcess(2);
  new RestartBackoff({ min: 100, max: 1000 }).relaunch(supervised);
  await tickThrough(250);
  assert.equal(starts(), 1, 'the second try waits 200 ms after the first failed');
  await tickThrough(1000);
  assert.deepEqual(seen, ['failed start 1', 'failed start 2', 'restarted {"pid":103,"attempt":3}']);
  await tickThrough(5000);
  assert.equal(starts(), 3, 'no try after a start succeeded');
});

test('a relaunch ends at a stop: none after it, and a process started meanwhile is stopped', async (t) => {
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  t.after(() => mock.timers.reset());
  const before = flakyProcess(0);
  before.stop();
  new RestartBackoff().relaunch(before.supervised);
  await tickThrough(1000);
  assert.equal(before.starts(), 0);

  const during = flakyProcess(0, true);
  new RestartBackoff().relaunch(during.supervised);
  await tickThrough(1000);
  assert.deepEqual(during.seen, ['stop']);

  const failedDuring = flakyProcess(5, true);
  new RestartBackoff().relaunch(failedDuring.supervised);
  await tickThrough(5000);
  assert.equal(failedDuring.starts(), 1, 'a start that failed after a stop is not tried again');
  assert.deepEqual(failedDuring.seen, []);
});
