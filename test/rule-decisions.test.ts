import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { before, describe, test } from 'node:test';
import { join } from 'node:path';
import {
  configurations,
  evaluatePrice,
  openSnapshot,
  readSnapshotFiles,
  thresholds,
  type PriceEvaluation,
  type PriceInput,
  type Snapshot,
} from '../src/pricing/index.js';
import { Decimal, Stage, atomicToAmount, plain } from '../src/rules/index.js';
import { root } from './support/service.js';

/**
 * Rules whose conditions read only the product, the settings, the billing and derived facts (a package picked from
 * the product's list) are decided by json-rules-engine once per snapshot, product and those values
 * (src/rules/decided-rules.ts). These tests hold that cache to running every rule
 * in every evaluation.
 */
let shipped: Snapshot;

before(async () => {
  shipped = await open();
});

async function open(edit?: (files: Record<string, string>) => void): Promise<Snapshot> {
  const files = readSnapshotFiles(join(root, 'catalog'), join(root, 'rules'));
  edit?.(files);
  const opened = await openSnapshot(files);
  assert.deepEqual(opened.diagnostics, []);
  return opened.snapshot!;
}

/** The same snapshot, its quote stage running every applicable rule in json-rules-engine in every evaluation. */
function everyRuleEachRun(snapshot: Snapshot): Snapshot {
  const quote = snapshot.rules.quote;
  return {
    ...snapshot,
    rules: { ...snapshot.rules, quote: new Stage(quote.rules, quote.derivedFacts, { decideOnce: false }) },
  };
}

function total(e: PriceEvaluation): string {
  if (e.outcome === 'priced') return e.output.total_atomic;
  return e.outcome === 'rejected' ? e.rejection.code : e.outcome;
}

const billings = [undefined, 'quote', 'one_time', 'monthly', 'annual'] as const;

describe('rules decided once per product and billing', () => {
  test('every product, billing and grid configuration: byte-identical evaluation (output, facts, trace) to running every rule', async () => {
    const reference = everyRuleEachRun(shipped);
    let compared = 0;
    for (const entry of shipped.catalog.products) {
      const grid = [...configurations(entry, thresholds(shipped, entry), { between: 2, acrossThresholds: true })].slice(
        0,
        150,
      );
      // Interleaved: each billing's decisions must stay its own.
      for (const parameters of [...grid, {}, { duration_hours: 'x' }]) {
        for (const billing of billings) {
          const input: PriceInput = { product_id: entry.product.id, parameters, ...(billing && { billing }) };
          const fast = await evaluatePrice(shipped, input);
          const slow = await evaluatePrice(reference, input);
          assert.equal(JSON.stringify(fast), JSON.stringify(slow), `${JSON.stringify(input)} differs`);
          compared++;
        }
      }
    }
    assert.ok(compared > 500, `only ${compared} evaluations compared`);
  });

  test('radio-directo: the billings interleaved each get their own decision', async () => {
    for (let round = 0; round < 3; round++) {
      for (const [billing, expected] of [
        ['monthly', '7452000'],
        ['quote', 'product_not_quotable'],
        ['annual', '74520000'],
        ['one_time', 'billing_not_supported'],
        [undefined, 'product_not_quotable'],
      ] as const) {
        assert.equal(
          total(
            await evaluatePrice(shipped, { product_id: 'radio-directo', parameters: {}, ...(billing && { billing }) }),
          ),
          expected,
          `billing ${billing}`,
        );
      }
    }
  });

  test('two snapshots with different rules, evaluated in turn, each price with their own rules', async () => {
    const edited = await open((files) => {
      const pricing = JSON.parse(files['rules/pricing.json']) as {
        rules: { name: string; conditions: unknown; event: { params: Record<string, unknown> } }[];
      };
      const base = pricing.rules.find((r) => r.name === 'formula-base')!;
      base.event.params.code = 'base_fee';
      // No base line with billing one_time (the bounds are checked with billing quote): a decision that depends on the billing.
      base.conditions = {
        all: [
          { fact: 'product', path: 'pricing.model', operator: 'equal', value: 'formula' },
          { fact: 'billing', operator: 'notEqual', value: 'one_time' },
        ],
      };
      files['rules/pricing.json'] = JSON.stringify(pricing);
    });
    assert.notEqual(edited.hash, shipped.hash);
    const input = (billing?: 'one_time' | 'quote'): PriceInput => ({
      product_id: 'instant-stream',
      parameters: { duration_hours: 2, max_listeners: 5, bitrate_kbps: 64 },
      ...(billing && { billing }),
    });
    const lineCodes = (e: PriceEvaluation) => (e.outcome === 'priced' ? e.output.lines.map((l) => l.code) : []);
    for (let round = 0; round < 3; round++) {
      assert.deepEqual(lineCodes(await evaluatePrice(shipped, input())), ['base', 'duration', 'transfer']);
      assert.deepEqual(lineCodes(await evaluatePrice(edited, input())), ['base_fee', 'duration', 'transfer']);
      assert.equal(total(await evaluatePrice(shipped, input())), String(250000 + 2 * 20000));
      assert.equal(total(await evaluatePrice(edited, input())), String(250000 + 2 * 20000));
      assert.equal(total(await evaluatePrice(shipped, input('one_time'))), String(250000 + 2 * 20000));
      assert.equal(total(await evaluatePrice(edited, input('one_time'))), String(2 * 20000));
      assert.equal(total(await evaluatePrice(edited, input('quote'))), String(250000 + 2 * 20000));
    }
    for (const billing of [undefined, 'one_time', 'quote'] as const) {
      assert.equal(
        JSON.stringify(await evaluatePrice(edited, input(billing))),
        JSON.stringify(await evaluatePrice(everyRuleEachRun(edited), input(billing))),
      );
    }
  });

  test('a decided trace is shared read-only: changing one evaluation cannot change the next', async () => {
    const input: PriceInput = {
      product_id: 'instant-stream',
      parameters: { duration_hours: 2, max_listeners: 5, bitrate_kbps: 64 },
    };
    const first = await evaluatePrice(shipped, input);
    assert.equal(first.outcome, 'priced');
    const before = JSON.stringify(first);
    const conditions = first.trace.quote[0].conditions as { all: Record<string, unknown>[] };
    assert.throws(() => {
      conditions.all[0].factResult = 'changed';
    }, TypeError);
    const line = first.trace.quote.find((t) => t.event)!.event as { params: Record<string, unknown> };
    line.params.rate_atomic = '1';
    assert.equal(JSON.stringify(await evaluatePrice(shipped, input)), before);
    // The rules file itself is untouched by evaluations.
    const pricing = JSON.parse(await readFile(join(root, 'rules', 'pricing.json'), 'utf8')) as {
      rules: { name: string; event: unknown }[];
    };
    assert.deepEqual(
      shipped.rules.quote.rules.find((r) => r.name === 'formula-base')!.event,
      pricing.rules.find((r) => r.name === 'formula-base')!.event,
    );
  });

  test('atomicToAmount moves the point of a whole number exactly as the Decimal division does', () => {
    let seed = 1;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    const cases: [string, number][] = [
      ['0', 0],
      ['0', 6],
      ['1', 6],
      ['1000000', 6],
      ['16150000', 6],
      ['270001', 6],
      ['5', 0],
      ['120', 1],
      ['9'.repeat(60), 6],
      ['9'.repeat(61), 6],
      ['1'.repeat(70), 18],
    ];
    for (let i = 0; i < 5000; i++) {
      let digits = String(1 + Math.floor(random() * 9));
      const length = 1 + Math.floor(random() * 64);
      while (digits.length < length) digits += random() < 0.4 ? '0' : String(Math.floor(random() * 10));
      cases.push([digits, Math.floor(random() * 30)]);
    }
    for (const [digits, decimals] of cases) {
      assert.equal(
        atomicToAmount(digits, decimals),
        plain(new Decimal(digits).dividedBy(new Decimal(10).pow(decimals))),
        `${digits} / 10^${decimals}`,
      );
    }
  });
});
