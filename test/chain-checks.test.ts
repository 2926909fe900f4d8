import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import type { Address } from 'viem';
import { ChainChecks } from '../src/payments/chain-checks.js';

/** The instance's budget of chain reads for sign-ins holds over any 60 s, also across the end of a clock minute. */

const address = (i: number) => `0x${i.toString(16).padStart(40, '0')}` as Address;

function checks(globalPerMinute: number, perAddressPerMinute = 10) {
  let reads = 0;
  const node = {
    getCode: async () => {
      reads++;
      return '0x' as const;
    },
    call: async () => undefined,
  };
  const chainChecks = new ChainChecks(node, { globalPerMinute, perAddressPerMinute, codeCacheMs: 0, gasCap: 1n });
  return { chainChecks, reads: () => reads };
}

async function outcome(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'read',
    (e: { code?: string }) => e.code ?? 'error',
  );
}

test('no more reads than the budget in any 60 s, and Retry-After says when the oldest leaves it', async (t) => {
  mock.timers.enable({ apis: ['Date'], now: 0 });
  t.after(() => mock.timers.reset());
  const { chainChecks, reads } = checks(5);
  mock.timers.tick(59_000);
  for (let i = 0; i < 5; i++) assert.equal(await outcome(chainChecks.hasCode(address(i))), 'read');
  mock.timers.tick(2_000); // 61 s: a new clock minute, but the five reads are 2 s old
  const refused = await chainChecks.hasCode(address(99)).catch((e) => e);
  assert.equal(refused.code, 'chain_checks_busy');
  assert.equal(refused.options.retryAfterSeconds, 58);
  assert.equal(reads(), 5);
  mock.timers.tick(58_000); // 119 s: the first five are a minute old
  assert.equal(await outcome(chainChecks.hasCode(address(100))), 'read');
  assert.equal(reads(), 6);
});

test("one address's budget too, whatever the others do", async (t) => {
  mock.timers.enable({ apis: ['Date'], now: 0 });
  t.after(() => mock.timers.reset());
  const { chainChecks } = checks(100, 3);
  const results = [];
  for (let i = 0; i < 4; i++) results.push(await outcome(chainChecks.hasCode(address(1))));
  assert.deepEqual(results, ['read', 'read', 'read', 'chain_checks_busy']);
  assert.equal(await outcome(chainChecks.hasCode(address(2))), 'read');
  mock.timers.tick(60_000);
  assert.equal(await outcome(chainChecks.hasCode(address(1))), 'read');
});
