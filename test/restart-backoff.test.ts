import assert from 'node:assert/strict';
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
