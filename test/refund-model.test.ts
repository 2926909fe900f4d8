/**
 * Refunds against a model of their own, with random services: an order, extensions and upgrades (paid by up to three
 * wallets, at random times while the service runs) and a stop at a random time. The model is written from the rule
 * docs/services.md states ("Stopping a service and its refund"), on a timeline it keeps itself, with integer arithmetic and
 * nothing imported from the refund code:
 *  - the order's base fee is kept once; every other atomic unit paid buys hours, at the rate of the payment it is in;
 *  - a payment's hours are the order's first hours, an extension's hours follow the expiry it extended (or, bought
 *    after the service expired, run from that moment), an upgrade's are the time that was left when it was bought
 *    (its hours: that time rounded up to 1/100 h, at least 1 h);
 *  - each payment gets back its amount less its base fee, times its hours not yet run at the stop (counted in whole
 *    millionths of an hour) over the hours it paid for, rounded down to the atomic unit;
 *  - each wallet gets what its own payments get back, nothing below the catalog's minimum refund.
 * The refund code is given only what it is given in production: the payments as the database lists them (creation
 * order, each with its hours), the service's expiry and the stop time (src/refunds/refund-terms.ts paymentsOf), then
 * evaluated by the shipped rules (src/pricing/refund.ts, rules/refunds.json).
 *
 * The seed is fixed and printed: REFUND_MODEL_SEED chooses another, REFUND_MODEL_RUNS (default 300) how many cases.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, test } from 'node:test';
import fc from 'fast-check';
import { getAddress } from 'viem';
import { evaluateRefund, openSnapshot, readSnapshotFiles, type Snapshot } from '../src/pricing/index.js';
import { type PaidRow, paymentsOf } from '../src/refunds/refund-terms.js';
import { root } from './support/service.js';

const SEED = Number(process.env.REFUND_MODEL_SEED ?? 20261134);
const RUNS = Number(process.env.REFUND_MODEL_RUNS ?? 300);

// The shipped catalog: instant-stream's base fee (0.25 USDC) and the minimum refund (0.05 USDC), in atomic units.
const BASE_FEE = 250_000n;
const MINIMUM_REFUND = 50_000n;
const HOUR_MS = 3_600_000;
const T0 = Date.parse('2026-11-26T00:00:00.000Z');
const WALLETS = ['0x' + 'a1'.repeat(20), '0x' + 'b2'.repeat(20), '0x' + 'c3'.repeat(20)].map((a) =>
  getAddress(a as `0x${string}`),
);

let snapshot: Snapshot;
before(async () => {
  const opened = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
  assert.ok(opened.snapshot, JSON.stringify(opened.diagnostics));
  snapshot = opened.snapshot;
});

/** What a test case is made of: the order, then each purchase a fraction of the remaining time later, then the stop. */
interface Case {
  order: { centihours: number; hourlyPart: number; wallet: number };
  steps: Array<
    | { kind: 'extension'; after: number; lapsedMs: number; centihours: number; amount: number; wallet: number }
    | { kind: 'upgrade'; after: number; amount: number; wallet: number }
  >;
  stopAfter: number;
}

const fraction = fc.double({ min: 0, max: 0.999, noNaN: true });
const wallet = fc.integer({ min: 0, max: WALLETS.length - 1 });
const caseArb: fc.Arbitrary<Case> = fc.record({
  order: fc.record({
    centihours: fc.integer({ min: 100, max: 72_000 }),
    hourlyPart: fc.integer({ min: 0, max: 20_000_000 }),
    wallet,
  }),
  steps: fc.array(
    fc.oneof(
      fc.record({
        kind: fc.constant('extension' as const),
        after: fraction,
        // Mostly bought while the service runs; else this long after it expired (within the 24 h grace period).
        lapsedMs: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: 24 * HOUR_MS })),
        centihours: fc.integer({ min: 1, max: 72_000 }),
        amount: fc.integer({ min: 1, max: 20_000_000 }),
        wallet,
      }),
      fc.record({
        kind: fc.constant('upgrade' as const),
        after: fraction,
        amount: fc.integer({ min: 1, max: 20_000_000 }),
        wallet,
      }),
    ),
    { maxLength: 5 },
  ),
  stopAfter: fraction,
});

/** One payment on the model's timeline (milliseconds since the order). */
interface Bought {
  id: string;
  kind: PaidRow['kind'];
  amount: bigint;
  base: bigint;
  /** The hours it paid for, in 1/100 h. */
  centihours: number;
  /** The time its hours cover. */
  from: number;
  to: number;
  wallet: string;
}

/** Plays a case out on a timeline: what was bought, when the service expires, when it was stopped. */
function timeline(c: Case): { bought: Bought[]; expiry: number; stop: number } {
  const bought: Bought[] = [];
  const orderMs = c.order.centihours * 36_000;
  bought.push({
    id: 'ord_0',
    kind: 'order',
    amount: BASE_FEE + BigInt(c.order.hourlyPart),
    base: BASE_FEE,
    centihours: c.order.centihours,
    from: 0,
    to: orderMs,
    wallet: WALLETS[c.order.wallet],
  });
  let now = 0;
  let expiry = orderMs;
  c.steps.forEach((step, i) => {
    now += Math.floor(step.after * (expiry - now));
    if (step.kind === 'extension') {
      const ms = step.centihours * 36_000;
      const id = `ord_${i + 1}`;
      // A service extended after it expired runs the hours bought from its return.
      if (step.lapsedMs > 0) now = expiry + step.lapsedMs;
      const from = Math.max(expiry, now);
      bought.push({
        id,
        kind: 'extension',
        amount: BigInt(step.amount),
        base: 0n,
        centihours: step.centihours,
        from,
        to: from + ms,
        wallet: WALLETS[step.wallet],
      });
      expiry = from + ms;
    } else {
      // Priced for the time left, rounded up to 1/100 h, at least the product's minimum duration (1 h).
      const centihours = Math.max(100, Math.ceil((expiry - now) / 36_000));
      const id = `ord_${i + 1}`;
      bought.push({
        id,
        kind: 'upgrade',
        amount: BigInt(step.amount),
        base: 0n,
        centihours,
        from: now,
        to: expiry,
        wallet: WALLETS[step.wallet],
      });
    }
  });
  const stop = now + Math.floor(c.stopAfter * (expiry - now));
  return { bought, expiry, stop };
}

/** The model: what each wallet gets back, from the docs' rule alone. */
function modelRefund(bought: Bought[], stop: number): Map<string, bigint> {
  const perWallet = new Map<string, bigint>();
  for (const p of bought) {
    const unusedMs = Math.max(0, p.to - Math.max(stop, p.from));
    // Millionths of an hour not yet run (3.6 ms each), at most the hours paid for.
    const paidMicro = BigInt(p.centihours) * 10_000n;
    const unusedMicro = BigInt(Math.floor((unusedMs * 10) / 36));
    const left = unusedMicro < paidMicro ? unusedMicro : paidMicro;
    const back = ((p.amount - p.base) * left) / paidMicro;
    perWallet.set(p.wallet, (perWallet.get(p.wallet) ?? 0n) + back);
  }
  for (const [w, amount] of perWallet) if (amount < MINIMUM_REFUND) perWallet.delete(w);
  return perWallet;
}

/** The production refund, given what the database would hold. */
async function productionRefund(bought: Bought[], expiry: number, stop: number) {
  const rows: PaidRow[] = bought.map((p) => ({
    id: p.id,
    kind: p.kind,
    amount_atomic: p.amount.toString(),
    hours: (p.centihours / 100).toFixed(2),
    payer: p.wallet,
    settlement: null,
    ...(p.kind === 'order' && { base_atomic: p.base.toString() }),
  }));
  const payments = paymentsOf(rows, new Date(T0 + expiry), new Date(T0 + stop));
  return evaluateRefund(snapshot, {
    refund_id: 'rf_model',
    service_id: 'svc_model',
    product_id: 'instant-stream',
    reason: 'stopped',
    as_of: new Date(T0 + stop).toISOString(),
    payments,
    refunded_atomic: '0',
    transfer_used_gb: '0',
  });
}

test(`refunds follow the documented rule (fast-check seed ${SEED}, ${RUNS} runs)`, async (t) => {
  t.diagnostic(`refund model: seed ${SEED}, ${RUNS} runs (REFUND_MODEL_SEED, REFUND_MODEL_RUNS)`);
  console.log(`refund model: fast-check seed ${SEED}, ${RUNS} runs`);
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      const { bought, expiry, stop } = timeline(c);
      const evaluation = await productionRefund(bought, expiry, stop);
      const paid = bought.reduce((sum, p) => sum + p.amount, 0n);
      const amount = BigInt(evaluation.amount_atomic);
      assert.ok(amount <= paid, `refunded ${amount}, more than the ${paid} paid`);
      assert.ok(amount <= paid - BASE_FEE, `refunded ${amount}: the base fee is not kept (paid ${paid})`);
      const expected = modelRefund(bought, stop);
      const got = new Map((evaluation.transfers ?? []).map((tr) => [tr.payer, BigInt(tr.amount_atomic)]));
      assert.deepEqual(
        Object.fromEntries([...got].map(([w, a]) => [w, a.toString()])),
        Object.fromEntries([...expected].map(([w, a]) => [w, a.toString()])),
        'per wallet: every unused paid hour back at the rate it was bought, the base fee kept once',
      );
      assert.equal(
        amount,
        [...expected.values()].reduce((sum, a) => sum + a, 0n),
        'the amount is the transfers',
      );
    }),
    { seed: SEED, numRuns: RUNS, includeErrorInReport: true },
  );
});

test('the model itself: a 10 h order of 0.45 stopped after 5 h gets 5 x 0.02 back', () => {
  const { bought, stop } = timeline({
    order: { centihours: 1000, hourlyPart: 200_000, wallet: 0 },
    steps: [],
    stopAfter: 0.5,
  });
  assert.deepEqual(modelRefund(bought, stop), new Map([[WALLETS[0], 100_000n]]));
});
