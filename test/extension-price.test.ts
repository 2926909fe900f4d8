import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { canonicalJson, extensionRecord, replayRecordText } from '../src/audit/index.js';
import {
  evaluateExtension,
  type ExtensionEvaluation,
  type ExtensionInput,
  type Snapshot,
} from '../src/pricing/index.js';
import { readFile, writeFile } from 'node:fs/promises';
import { cli, copyCatalog } from './support/service.js';
import { priceExtension } from '../src/orders/extension-price.js';
import type { ServiceRow } from '../src/services/index.js';
import { shippedSnapshot } from './support/shipped-snapshot.js';

let snapshot: Snapshot;

before(async () => {
  snapshot = await shippedSnapshot();
});

const stream = { duration_hours: 1, max_listeners: 10, bitrate_kbps: 64 };
const autodj = {
  duration_hours: 24,
  listeners: 50,
  bitrate_kbps: 64,
  storage_mb: 1,
  transfer_gb: 0,
  playlist: 'a.mp3',
  shuffle: false,
};

const input = (product_id: string, limits: Record<string, unknown>, extend_hours: number): ExtensionInput => ({
  service_id: 'svc_test0001',
  product_id,
  limits,
  paid_hours: Number(limits.duration_hours),
  extend_hours,
});

function priced(e: ExtensionEvaluation) {
  assert.equal(e.outcome, 'priced', JSON.stringify(e));
  return e as Extract<ExtensionEvaluation, { outcome: 'priced' }>;
}

function refused(e: ExtensionEvaluation) {
  assert.equal(e.outcome, 'refused', JSON.stringify(e));
  return e as Extract<ExtensionEvaluation, { outcome: 'refused' }>;
}

describe('the price of an extension, from the rules', () => {
  test('a formula product: the added hours at its hourly rate, the transfer and base not charged again', async () => {
    const e = priced(await evaluateExtension(snapshot, input('instant-stream', { ...stream, transfer_gb: 5 }, 100)));
    assert.equal(e.amount_atomic, '2000000', '100 h x 0.02 USDC');
    assert.equal(e.total.output.configuration.duration_hours, 101);
    assert.equal(e.paid.output.configuration.duration_hours, 1);
    assert.equal(e.total.output.configuration.transfer_gb, 5);
  });

  test('below the order minimum the minimum is charged, as upgrades charge it', async () => {
    const e = priced(await evaluateExtension(snapshot, input('instant-stream', stream, 2)));
    assert.equal(e.amount_atomic, '270000');
    assert.equal(e.minimum_atomic, '270000');
  });

  test('a package product: the package covering the new total minus the package that covered the paid hours', async () => {
    assert.equal(
      priced(await evaluateExtension(snapshot, input('temporary-autodj', autodj, 24))).amount_atomic,
      '1410000',
      '7d 1.90 - 24h 0.49',
    );
    assert.equal(
      priced(await evaluateExtension(snapshot, input('temporary-autodj', autodj, 696))).amount_atomic,
      '6410000',
      '30d 6.90 - 24h 0.49',
    );
    const inside = priced(
      await evaluateExtension(snapshot, input('temporary-autodj', { ...autodj, duration_hours: 48 }, 24)),
    );
    assert.equal(inside.amount_atomic, '270000', 'still inside the 7-day package: the minimum');
  });

  test("the product's maximum duration counts over the whole life of the service", async () => {
    priced(await evaluateExtension(snapshot, input('instant-stream', { ...stream, duration_hours: 700 }, 20)));
    const over = refused(
      await evaluateExtension(snapshot, input('instant-stream', { ...stream, duration_hours: 700 }, 20.5)),
    );
    assert.equal(over.code, 'extension_too_long');
    assert.match(
      over.message,
      /at most 720 hours over its whole life; 700 are paid, so it can be extended by at most 20 hours/,
    );
  });

  test('above the order maximum it is refused: extend by fewer hours', async () => {
    const settings = snapshot.catalog.settings;
    const strict = {
      ...snapshot,
      catalog: {
        ...snapshot.catalog,
        settings: { ...settings, order_limits: { ...settings.order_limits, maximum: '1.00' } },
      },
    } as Snapshot;
    const over = refused(await evaluateExtension(strict, input('temporary-autodj', autodj, 24)));
    assert.equal(over.code, 'amount_out_of_range');
    assert.match(over.message, /1\.41 USDC; one payment may cost at most 1\.00 USD/);
    assert.equal(priced(await evaluateExtension(strict, input('instant-stream', stream, 10))).amount_atomic, '270000');
  });

  test('a product not sold by the hour cannot be extended', async () => {
    assert.equal(
      refused(await evaluateExtension(snapshot, input('radio-directo', {}, 1))).code,
      'extension_not_possible',
    );
  });

  test('the record replays byte for byte on its snapshot; an edited amount does not', async () => {
    const given = input('temporary-autodj', autodj, 24);
    const { text } = extensionRecord(
      'ev_ext_test01',
      snapshot.hash,
      given,
      priced(await evaluateExtension(snapshot, given)),
      new Date('2026-01-01T00:00:00Z'),
    );
    const report = await replayRecordText('ev_ext_test01', text, async () => snapshot);
    assert.equal(report.identical, true, JSON.stringify(report));
    assert.equal(report.kind, 'extension_price');
    const edited = canonicalJson({ ...JSON.parse(text), amount_atomic: '1' });
    const tampered = await replayRecordText('ev_ext_test01', edited, async () => snapshot);
    assert.equal(tampered.identical, false);
    assert.ok(
      tampered.differences!.some((d) => d.path === '$.amount_atomic'),
      JSON.stringify(tampered.differences),
    );
  });

  test('catalog preview --extend-hours shows the price from the files on disk; a catalog editor changes it without code', {
    timeout: 120_000,
  }, async () => {
    const copy = await copyCatalog();
    try {
      const env = { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir };
      const args = [
        'catalog',
        'preview',
        'temporary-autodj',
        '--param',
        'duration_hours=24',
        '--param',
        'storage_mb=1',
        '--param',
        'bitrate_kbps=64',
        '--extend-hours',
        '24',
        '--json',
      ];
      const before = await cli(args, env);
      assert.equal(before.code, 0, before.stderr);
      assert.equal(JSON.parse(before.stdout).amount_atomic, '1410000');
      const file = join(copy.catalogDir, 'products/temporary-autodj.yaml');
      await writeFile(
        file,
        (await readFile(file, 'utf8')).replace('amount_atomic: "1900000"', 'amount_atomic: "2000000"'),
      );
      const after = await cli(args, env);
      assert.equal(after.code, 0, after.stderr);
      assert.equal(JSON.parse(after.stdout).amount_atomic, '1510000', 'the 7-day package now costs 2.00');
      const tooLong = await cli([...args.slice(0, -3), '--extend-hours', '697'], env);
      assert.equal(tooLong.code, 1);
      assert.match(tooLong.stderr, /extension_too_long/);
    } finally {
      await copy.remove();
    }
  });
});

describe("an extension is at least its product's minimum duration, as an order", () => {
  const service = (product_id: string, limits: Record<string, unknown>) =>
    ({
      id: 'svc_test0001',
      product_id,
      limits,
      status: 'active',
      expires_at: new Date(Date.now() + 3_600_000),
      stopped_at: null,
    }) as unknown as ServiceRow;

  test('below it: 422 extension_too_short naming the minimum, before any price; at it: priced', async () => {
    for (const [product, limits] of [
      ['instant-stream', stream],
      ['temporary-autodj', autodj],
    ] as const) {
      for (const hours of [0.0000001, 0.5, 0.999]) {
        await assert.rejects(priceExtension(snapshot, service(product, limits), hours), (e: any) => {
          assert.equal(e.status, 422);
          assert.equal(e.code, 'extension_too_short');
          assert.match(
            e.message,
            new RegExp(`A ${product} service is extended by at least 1 hour .*${hours} was asked`),
          );
          assert.match(e.message, /Nothing was charged\. Send duration_hours of 1 or more\./);
          assert.deepEqual(e.options.details, [
            { pointer: '/duration_hours', code: 'minimum', message: 'must be >= 1', minimum: 1 },
          ]);
          return true;
        });
      }
      const least = await priceExtension(snapshot, service(product, limits), 1);
      assert.equal(least.input.extend_hours, 1);
    }
  });
});
