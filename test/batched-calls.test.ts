import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BatchedCalls } from '../src/store/index.js';

// Quotes are recorded through a BatchedCalls: each call of record_quotes has a fixed cost, so writes that arrive together
// must share a call.

function recordingWriter(maxInFlight = 2) {
  const calls: number[][] = [];
  const pending: Array<() => void> = [];
  const writer = new BatchedCalls<number, string>((items) => {
    calls.push(items);
    return new Promise((resolve) => pending.push(() => resolve(items.map((i) => `done ${i}`))));
  }, maxInFlight);
  const finishAll = () => {
    while (pending.length) pending.shift()!();
  };
  return { writer, calls, pending, finishAll };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('BatchedCalls', () => {
  test('writes made in one turn of the event loop go in one call, even when no call is under way', async () => {
    const { writer, calls, finishAll } = recordingWriter();
    const results = [1, 2, 3].map((i) => writer.call(i));
    await turn();
    assert.deepEqual(calls, [[1, 2, 3]]);
    finishAll();
    assert.deepEqual(await Promise.all(results), ['done 1', 'done 2', 'done 3']);
  });

  test('with maxInFlight calls under way, later writes wait and go together in the next call', async () => {
    const { writer, calls, pending, finishAll } = recordingWriter(2);
    const first = writer.call(1);
    await turn();
    const second = writer.call(2);
    await turn();
    const waiting = [3, 4, 5].map((i) => writer.call(i));
    await turn();
    assert.deepEqual(calls, [[1], [2]], 'two calls under way: the third waits');
    pending.shift()!();
    await first;
    await turn();
    assert.deepEqual(calls, [[1], [2], [3, 4, 5]]);
    finishAll();
    assert.deepEqual(await Promise.all([second, ...waiting]), ['done 2', 'done 3', 'done 4', 'done 5']);
  });

  test('a failed call is retried one write at a time: only the bad write fails', async () => {
    const calls: number[][] = [];
    const writer = new BatchedCalls<number, number>(async (items) => {
      calls.push(items);
      if (items.includes(2)) throw new Error('bad write');
      return items;
    });
    const results = await Promise.allSettled([1, 2, 3].map((i) => writer.call(i)));
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.deepEqual(calls, [[1, 2, 3], [1], [2], [3]]);
  });
});
