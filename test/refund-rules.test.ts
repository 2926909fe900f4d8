import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { replayRecordText } from '../src/audit/index.js';
import { refundRecord } from '../src/audit/refund-record.js';
import {
  evaluateRefund,
  openSnapshot,
  readSnapshotFiles,
  type RefundInput,
  type Snapshot,
} from '../src/pricing/index.js';
import { cli, root } from './support/service.js';

let snapshot: Snapshot;
before(async () => {
  const opened = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
  assert.ok(opened.snapshot, JSON.stringify(opened.diagnostics));
  snapshot = opened.snapshot;
});

const stop = (fields: Partial<RefundInput>): RefundInput => ({
  refund_id: 'rf_test',
  service_id: 'svc_test',
  product_id: 'instant-stream',
  reason: 'stopped',
  as_of: '2026-11-26T00:00:00.000Z',
  payments: [],
  refunded_atomic: '0',
  transfer_used_gb: '0',
  ...fields,
});

describe('the refund rules (rules/refunds.json)', () => {
  test('a stopped service gets its unused hours back at the rate it bought them; the base fee is kept once', async () => {
    // 0.45 USDC for 10 h: the 0.25 base fee and 10 h at 0.02. 7.5 h unused: 7.5 x 0.02 (earlier rules pro-rated the whole
    // 0.45 and took the base fee off again: 87500).
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [{ order_id: 'ra_1', kind: 'order', amount_atomic: '450000', hours: '10', unused_hours: '7.5' }],
      }),
    );
    assert.deepEqual(
      evaluation.lines.map((l) => [l.code, l.direction, l.amount_atomic]),
      [['unused_hours', 'credit', '150000']],
    );
    assert.equal(evaluation.total_atomic, '150000');
    assert.equal(evaluation.amount_atomic, '150000');
    assert.deepEqual(evaluation.facts.paid, {
      received_atomic: '450000',
      unused_atomic: '337500',
      unused_hours_atomic: '150000',
      refunded_atomic: '0',
    });
  });

  test('a 10 h stream (0.45) stopped after 5 h gets 5 x 0.02 back, not 0', async () => {
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [{ order_id: 'ra_1', kind: 'order', amount_atomic: '450000', hours: '10', unused_hours: '5' }],
      }),
    );
    assert.equal(evaluation.amount_atomic, '100000');
  });

  test("the base fee kept is the one the order was charged (its own price evaluation), not the catalog's now", async () => {
    // An order priced when the base fee was 0.10: 0.30 for 10 h; half of its 0.20 of hours comes back.
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [
          {
            order_id: 'ra_1',
            kind: 'order',
            amount_atomic: '300000',
            hours: '10',
            unused_hours: '5',
            base_atomic: '100000',
          },
        ],
      }),
    );
    assert.equal(evaluation.amount_atomic, '100000');
  });

  test('transfer already used is kept at its price per GB', async () => {
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        transfer_used_gb: '2.5',
        payments: [{ order_id: 'ra_1', kind: 'order', amount_atomic: '2000000', hours: '10', unused_hours: '10' }],
      }),
    );
    assert.equal(evaluation.lines.find((l) => l.code === 'transfer_used')?.amount_atomic, '37500');
    assert.equal(evaluation.amount_atomic, String(2_000_000 - 250_000 - 37_500));
  });

  test('buy and stop at once: below the minimum refund nothing is sent (no gas spent on dust)', async () => {
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [{ order_id: 'ra_1', kind: 'order', amount_atomic: '270000', hours: '1', unused_hours: '0.999' }],
      }),
    );
    assert.equal(evaluation.total_atomic, String(Math.floor(20000 * 0.999)));
    assert.equal(evaluation.minimum_atomic, '50000');
    assert.equal(evaluation.amount_atomic, '0');
  });

  test('never more than was received minus refunds already made', async () => {
    const payments = [
      { order_id: 'ra_1', kind: 'order' as const, amount_atomic: '5000000', hours: '10', unused_hours: '10' },
    ];
    const evaluation = await evaluateRefund(snapshot, stop({ payments, refunded_atomic: '4900000' }));
    assert.equal(evaluation.bound_atomic, '100000');
    assert.equal(evaluation.amount_atomic, '100000');
    const spent = await evaluateRefund(snapshot, stop({ payments, refunded_atomic: '5000000' }));
    assert.equal(spent.amount_atomic, '0');
  });

  test('an upgrade refunds what was paid for it, not the credit it was given: the credit is not refunded again', async () => {
    // 10 h order of 0.45, upgraded with 5 h left: the order's unused share then was 225000 and was credited, the upgrade
    // cost 0.5 for those 5 h. Stopped with 2.5 h left: 2.5 of the order's 10 h at 0.02 (its base fee kept), and half
    // of the upgrade's own 5 h at the rate it paid for them (no base fee in it).
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [
          { order_id: 'ra_1', kind: 'order', amount_atomic: '450000', hours: '10', unused_hours: '2.5' },
          { order_id: 'ra_2', kind: 'upgrade', amount_atomic: '500000', hours: '5', unused_hours: '2.5' },
        ],
      }),
    );
    assert.equal((evaluation.facts.paid as Record<string, string>).unused_hours_atomic, String(50000 + 250000));
    assert.equal(evaluation.amount_atomic, String(50000 + 250000));
  });

  test("an extension is refunded for its own hours not yet used, whole: the base fee was the order's", async () => {
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [
          { order_id: 'ra_1', kind: 'order', amount_atomic: '450000', hours: '10', unused_hours: '0' },
          { order_id: 'ra_3', kind: 'extension', amount_atomic: '2000000', hours: '10', unused_hours: '4' },
        ],
      }),
    );
    assert.equal(evaluation.amount_atomic, '800000');
  });

  test('an order we could not provision comes back in full, base fee included', async () => {
    const evaluation = await evaluateRefund(snapshot, {
      ...stop({
        payments: [{ order_id: 'ra_1', kind: 'order', amount_atomic: '450000', hours: '10', unused_hours: '10' }],
      }),
      reason: 'provisioning_failed',
    });
    assert.deepEqual(
      evaluation.lines.map((l) => l.code),
      ['not_delivered'],
    );
    assert.equal(evaluation.amount_atomic, '450000');
  });

  test('the evaluation is a record that replays byte for byte on its snapshot', async () => {
    const input = stop({
      payments: [{ order_id: 'ra_1', kind: 'order', amount_atomic: '450000', hours: '10', unused_hours: '7.5' }],
    });
    const { text } = refundRecord(
      'rfe_test',
      snapshot.hash,
      input,
      await evaluateRefund(snapshot, input),
      new Date('2026-11-26T00:00:00Z'),
    );
    const report = await replayRecordText('rfe_test', text, async () => snapshot);
    assert.equal(report.identical, true, JSON.stringify(report));
    const edited = text.replace('"amount_atomic":"150000"', '"amount_atomic":"387500"');
    assert.notEqual(edited, text);
    assert.equal((await replayRecordText('rfe_test', edited, async () => snapshot)).identical, false);
  });

  test('a record stored under the earlier refund rule still replays byte for byte on the rules it ran on', async () => {
    // The refund rules then pro-rated whole payments and deducted the base fee whole (unused_share, base_fee): the
    // record keeps its facts, lines and transfers, as the code and rules of then wrote them.
    const earlierRule = JSON.parse(readFileSync(join(root, 'test/support/refund-record-earlier-rule.json'), 'utf8'));
    const files = readSnapshotFiles(join(root, 'catalog'), join(root, 'rules'));
    const opened = await openSnapshot({ ...files, 'rules/refunds.json': earlierRule.rules_refunds_json });
    assert.ok(opened.snapshot, JSON.stringify(opened.diagnostics));
    const old = opened.snapshot;
    const text: string = earlierRule.record;
    assert.deepEqual(
      JSON.parse(text).lines.map((l: { code: string }) => l.code),
      ['unused_share', 'base_fee', 'transfer_used'],
    );
    const report = await replayRecordText('rfe_before_34', text, async () => old);
    assert.equal(report.identical, true, JSON.stringify(report));
    // The same input on today's rules is the new rule: 7.5 h of the order at 0.02 less 1 GB, and the extension whole.
    const now = await evaluateRefund(snapshot, JSON.parse(text).input);
    assert.deepEqual(
      now.transfers?.map((t) => t.amount_atomic),
      [String(150000 - 15000), '270000'],
    );
  });

  test('catalog preview shows the refund of a service shape stopped after some hours', async () => {
    const shown = await cli([
      'catalog',
      'preview',
      'instant-stream',
      '--param',
      'duration_hours=10',
      '--param',
      'max_listeners=2',
      '--param',
      'bitrate_kbps=64',
      '--stop-after-hours',
      '2.5',
      '--transfer-used-gb',
      '1',
      '--json',
    ]);
    assert.equal(shown.code, 0, shown.stderr);
    const { refund } = JSON.parse(shown.stdout);
    // 7.5 of the 10 h at 0.02 (the base fee kept), less 1 GB used at 0.015.
    assert.equal(refund.amount_atomic, String(150000 - 15000));
    assert.deepEqual(
      refund.lines.map((l: { code: string }) => l.code),
      ['unused_hours', 'transfer_used'],
    );
  });
});

describe('a service paid by several wallets: the refund is split per wallet that paid', () => {
  const A = '0x00000000000000000000000000000000000000aA';
  const B = '0x00000000000000000000000000000000000000bB';
  const order = (unused: string, payer = A) => ({
    order_id: 'ra_1',
    kind: 'order' as const,
    amount_atomic: '450000',
    hours: '10',
    unused_hours: unused,
    payer,
  });
  const extension = (unused: string, payer = B, id = 'ra_3') => ({
    order_id: id,
    kind: 'extension' as const,
    amount_atomic: '2000000',
    hours: '10',
    unused_hours: unused,
    payer,
  });

  test('latest payment first, each at most its own unused share: what is kept falls on the earliest one', async () => {
    // A's order: 7.5 h at 0.02 unused (its base fee kept); B's extension: 800000 unused.
    const evaluation = await evaluateRefund(snapshot, stop({ payments: [order('7.5'), extension('4')] }));
    assert.deepEqual(evaluation.transfers, [
      { payer: A, order_ids: ['ra_1'], amount_atomic: '150000' },
      { payer: B, order_ids: ['ra_3'], amount_atomic: '800000' },
    ]);
    assert.equal(evaluation.amount_atomic, '950000');
    // Transfer used is kept from the earliest payment's share.
    const used = await evaluateRefund(
      snapshot,
      stop({ payments: [order('7.5'), extension('4')], transfer_used_gb: '2' }),
    );
    assert.deepEqual(
      used.transfers?.map((t) => t.amount_atomic),
      ['120000', '800000'],
    );
  });

  test('no wallet gets back more than its own unused share, nor anything another wallet paid', async () => {
    // A's order is used up (its base fee with it): B gets its own unused share, and A gets nothing of B's money.
    const evaluation = await evaluateRefund(snapshot, stop({ payments: [order('0'), extension('4')] }));
    assert.deepEqual(evaluation.transfers, [{ payer: B, order_ids: ['ra_3'], amount_atomic: '800000' }]);
    // However the payments are ordered, each wallet's transfer stays within what it paid.
    const payments = [order('10'), extension('10', A, 'ra_2'), extension('10')];
    const both = await evaluateRefund(snapshot, stop({ payments }));
    assert.deepEqual(both.transfers, [
      { payer: A, order_ids: ['ra_1', 'ra_2'], amount_atomic: String(450000 - 250000 + 2000000) },
      { payer: B, order_ids: ['ra_3'], amount_atomic: '2000000' },
    ]);
  });

  test('a wallet whose share is below the minimum refund gets nothing sent (no gas spent on dust)', async () => {
    // A: 270000 less the 250000 base fee = 20000 of hours, below the 50000 minimum; B's 800000 is sent.
    const evaluation = await evaluateRefund(
      snapshot,
      stop({
        payments: [{ ...order('10'), amount_atomic: '270000' }, extension('4')],
      }),
    );
    assert.deepEqual(evaluation.transfers, [{ payer: B, order_ids: ['ra_3'], amount_atomic: '800000' }]);
    assert.equal(evaluation.amount_atomic, '800000');
  });

  test('the split is part of the record: it replays, and an edited destination does not', async () => {
    const input = stop({ payments: [order('7.5'), extension('4')] });
    const evaluation = await evaluateRefund(snapshot, input);
    const { text } = refundRecord('rfe_split', snapshot.hash, input, evaluation, new Date('2026-11-26T00:00:00Z'));
    assert.equal((await replayRecordText('rfe_split', text, async () => snapshot)).identical, true);
    const toB = `{"amount_atomic":"800000","order_ids":["ra_3"],"payer":"${B}"}`;
    const edited = text.replace(toB, toB.replace(B, A));
    assert.notEqual(edited, text);
    assert.equal((await replayRecordText('rfe_split', edited, async () => snapshot)).identical, false);
  });
});
