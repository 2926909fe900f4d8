import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ProbeSlots } from '../src/services/probe-slots.js';

const MB = 1024 * 1024;

/** A check that runs until it is let go; `started` says whether it got a slot. */
function check(slots: ProbeSlots, owner: string, bytes: number) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const state = { started: false, release, done: undefined as unknown as Promise<string> };
  state.done = slots
    .run(owner, bytes, async () => {
      state.started = true;
      await held;
    })
    .then(
      () => 'ran',
      (e: { code?: string }) => e.code ?? 'error',
    );
  return state;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('audio-check slots are shared by cost, not only by key', () => {
  test('two giant checks from two keys leave a slot to a small upload, which never waits behind them', async () => {
    const slots = new ProbeSlots(2, 4, 60_000, 16 * MB);
    const giantA = check(slots, 'key-a', 123 * MB);
    const giantB = check(slots, 'key-b', 123 * MB);
    await turn();
    assert.equal(giantA.started, true);
    assert.equal(giantB.started, false, 'a second large check waits: one slot stays for small files');

    const small = check(slots, 'key-c', 300_000);
    await turn();
    assert.equal(small.started, true, 'the small upload is checked at once');
    small.release();
    assert.equal(await small.done, 'ran');

    giantA.release();
    assert.equal(await giantA.done, 'ran');
    await turn();
    assert.equal(giantB.started, true);
    giantB.release();
    assert.equal(await giantB.done, 'ran');
  });

  test('waiting small checks go before waiting large ones, and large ones wait in a queue of their own', async () => {
    const slots = new ProbeSlots(2, 4, 60_000, 16 * MB);
    const giant = check(slots, 'key-a', 100 * MB);
    const running = check(slots, 'key-b', MB);
    await turn();
    assert.equal(giant.started && running.started, true);

    // The large queue holds 2 (half of 4), one per key at most here.
    const queuedLarge = [check(slots, 'key-c', 50 * MB), check(slots, 'key-d', 50 * MB)];
    const refusedLarge = check(slots, 'key-e', 50 * MB);
    assert.equal(await refusedLarge.done, 'audio_check_busy');
    assert.throws(() => slots.refuseIfFull('key-f', 50 * MB), { code: 'audio_check_busy' });
    // A full large queue does not turn a small upload away.
    slots.refuseIfFull('key-f', MB);
    const waitingSmall = check(slots, 'key-f', MB);
    await turn();
    assert.equal(waitingSmall.started, false);

    running.release();
    await running.done;
    await turn();
    assert.equal(waitingSmall.started, true, 'the small check gets the freed slot before the large ones');
    assert.equal(
      queuedLarge.some((c) => c.started),
      false,
    );
    waitingSmall.release();
    giant.release();
    await Promise.all([waitingSmall.done, giant.done]);
    for (const c of queuedLarge) {
      for (let i = 0; i < 5 && !c.started; i++) await turn();
      assert.equal(c.started, true);
      c.release();
      assert.equal(await c.done, 'ran');
    }
  });
});
