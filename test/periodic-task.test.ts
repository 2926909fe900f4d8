import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Logger } from '../src/log/index.js';
import { PeriodicTask } from '../src/tasks/index.js';
import { waitFor } from './support/streaming.js';

const quiet: Logger = { info: () => {}, warn: () => {}, error: () => {} };
const HOUR_MS = 3_600_000;

/** A task whose passes are counted, and whose first pass waits until `releaseFirst` is called. */
function countedTask(kickGapMs: number) {
  const started: number[] = [];
  let releaseFirst: () => void = () => {};
  const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
  const task = new PeriodicTask(
    'counted',
    async () => {
      started.push(Date.now());
      if (started.length === 1) await firstHeld;
    },
    { intervalMs: HOUR_MS, log: quiet, kickGapMs },
  );
  return { task, started, releaseFirst };
}

test('a kick during a pass runs another pass after it, though the interval is an hour', async () => {
  const { task, started, releaseFirst } = countedTask(50);
  task.start();
  try {
    await waitFor('the first pass', () => started.length === 1);
    task.kick();
    releaseFirst();
    await waitFor('the pass the kick asked for', () => started.length === 2, 5000);
  } finally {
    await task.stop();
  }
});

test('kicks in a burst share one pass, which starts no sooner than the gap after the previous one', async () => {
  const gapMs = 200;
  const { task, started, releaseFirst } = countedTask(gapMs);
  releaseFirst();
  task.start();
  try {
    await waitFor('the first pass', () => started.length === 1);
    for (let i = 0; i < 20; i++) task.kick();
    await waitFor('the pass the kicks asked for', () => started.length === 2, 5000);
    assert.ok(started[1] - started[0] >= gapMs - 1, `${started[1] - started[0]} ms apart`);
    task.kick();
    await waitFor('the pass of a later kick', () => started.length === 3, 5000);
    assert.equal(started.length, 3, 'twenty kicks in a burst ran one pass');
  } finally {
    await task.stop();
  }
});
