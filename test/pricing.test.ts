import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { evaluatePrice, type PriceEvaluation, type Snapshot } from '../src/pricing/index.js';
import { shippedSnapshot } from './support/shipped-snapshot.js';

let snapshot: Snapshot;

before(async () => {
  snapshot = await shippedSnapshot();
});

async function price(product_id: string, parameters: Record<string, unknown>) {
  return evaluatePrice(snapshot, { product_id, parameters });
}

function priced(e: PriceEvaluation) {
  assert.equal(e.outcome, 'priced', JSON.stringify(e));
  return (e as Extract<PriceEvaluation, { outcome: 'priced' }>).output;
}

const stream = { max_listeners: 10, bitrate_kbps: 64 };

describe('pricing rules', () => {
  test('each line is rounded up to a whole atomic unit and the total is the sum of the lines', async () => {
    const out = priced(await price('instant-stream', { duration_hours: 1.00000005, ...stream }));
    assert.equal(out.lines.find((l) => l.code === 'duration')!.amount_atomic, '20001');
    assert.equal(out.total_atomic, '270001');
    assert.equal(out.amount, '0.270001');

    const transfer = priced(await price('instant-stream', { duration_hours: 1, ...stream, transfer_gb: 0.3333333 }));
    assert.equal(transfer.lines.find((l) => l.code === 'transfer')!.amount_atomic, '5000');
    assert.equal(transfer.total_atomic, String(250000 + 20000 + 5000));
  });

  test('the catalog hits the order limits exactly at its cheapest and dearest configurations', async () => {
    assert.equal(priced(await price('instant-stream', { duration_hours: 1, ...stream })).amount, '0.27');
    assert.equal(
      priced(await price('event-stream', { duration_hours: 720, ...stream, transfer_gb: 100 })).amount,
      '16.15',
    );
  });

  test('a price line never uses binary floating point', async () => {
    // 0.1 + 0.2 style inputs: 0.3 GB at 15000/GB is exactly 4500 atomic units.
    const out = priced(await price('event-stream', { duration_hours: 2.3, ...stream, transfer_gb: 0.3 }));
    assert.deepEqual(
      out.lines.map((l) => l.amount_atomic),
      ['250000', '46000', '4500'],
    );
    assert.equal(out.total_atomic, '300500');
  });

  test('temporary-autodj takes the smallest package covering duration and storage, plus transfer', async () => {
    const cases: [number, number, string, string][] = [
      [24, 5120, '24h-5gb', '490000'],
      [24.5, 100, '7d-5gb', '1900000'],
      [168, 5121, '30d-10gb', '6900000'],
      [720, 10240, '30d-10gb', '6900000'],
    ];
    for (const [duration_hours, storage_mb, item, amount] of cases) {
      const out = priced(
        await price('temporary-autodj', { duration_hours, storage_mb, bitrate_kbps: 64, transfer_gb: 2 }),
      );
      const line = out.lines.find((l) => l.code === 'package')!;
      assert.equal(line.item, item, `${duration_hours} h, ${storage_mb} MB`);
      assert.equal(line.amount_atomic, amount);
      assert.equal(out.total_atomic, String(Number(amount) + 30000));
      assert.equal(out.configuration.listeners, 50, 'default filled in');
    }
  });

  test('storage above the largest package is rejected with no_package_covers', async () => {
    const e = await price('temporary-autodj', { duration_hours: 2, storage_mb: 10241, bitrate_kbps: 64 });
    assert.equal(e.outcome, 'rejected');
    const { rejection } = e as Extract<PriceEvaluation, { outcome: 'rejected' }>;
    assert.equal(rejection.status, 422);
    assert.equal(rejection.code, 'no_package_covers');
    assert.equal(rejection.pointer, '/parameters/storage_mb');
    assert.match(rejection.message, /10240 MB/);
  });

  test('parameters are validated strictly: type without coercion, bounds, required, unknown names', async () => {
    const e = await price('instant-stream', { duration_hours: '24', max_listeners: 51, bogus: true });
    assert.equal(e.outcome, 'rejected');
    const { rejection, problems } = e as Extract<PriceEvaluation, { outcome: 'rejected' }>;
    assert.equal(rejection.code, 'invalid_parameters');
    assert.deepEqual(problems!.map((p) => p.pointer).sort(), [
      '/parameters/bitrate_kbps',
      '/parameters/bogus',
      '/parameters/duration_hours',
      '/parameters/max_listeners',
    ]);
  });

  test('instant-stream accepts transfer_gb although it does not publish it', async () => {
    assert.equal(snapshot.catalog.byId.get('instant-stream')!.product.parameters.transfer_gb, undefined);
    const out = priced(await price('instant-stream', { duration_hours: 1, ...stream, transfer_gb: 100 }));
    assert.equal(out.total_atomic, '1770000');
    const e = await price('instant-stream', { duration_hours: 1, ...stream, transfer_gb: 100.5 });
    assert.equal(e.outcome, 'rejected');
  });

  test('product-level rules: subscriptions, planned and pricing-pending products are not quoted', async () => {
    const codes = async (id: string) => {
      const e = await price(id, {});
      return e.outcome === 'rejected' ? [e.rejection.status, e.rejection.code] : e.outcome;
    };
    assert.deepEqual(await codes('radio-directo'), [422, 'product_not_quotable']);
    assert.deepEqual(await codes('temporary-audio'), [409, 'product_planned']);
    assert.deepEqual(
      await codes('audio-storage-api'),
      [422, 'invalid_parameters'],
      'priced per service, with parameters',
    );
    assert.deepEqual(await codes('streaming-boost-relay'), [409, 'pricing_pending']);
    assert.equal(await codes('nope'), 'unknown_product');
  });

  test('subscriptions are priced for orders from their EUR price through the catalog exchange rate', async () => {
    const monthly = priced(
      await evaluatePrice(snapshot, { product_id: 'radio-directo', parameters: {}, billing: 'monthly' }),
    );
    assert.deepEqual(
      monthly.lines.map((l) => [l.code, l.quantity, l.unit, l.rate_atomic, l.amount_atomic]),
      [['subscription_month', '6.9', 'EUR', '1080000', '7452000']],
    );
    const annual = priced(
      await evaluatePrice(snapshot, { product_id: 'radio-directo', parameters: {}, billing: 'annual' }),
    );
    assert.equal(annual.total_atomic, '74520000');
    const quoted = await evaluatePrice(snapshot, {
      product_id: 'instant-stream',
      parameters: { duration_hours: 1, ...stream },
      billing: 'monthly',
    });
    assert.equal(quoted.outcome === 'rejected' && quoted.rejection.code, 'billing_not_supported');
  });

  test('orderability: the orderable products are exactly those of the spec', () => {
    const orderable = [...snapshot.verdicts].filter(([, v]) => v.notOrderable.length === 0).map(([id]) => id);
    // audio-storage-api: retention of a service's recordings, sold per service (not with POST /orders).
    assert.deepEqual(orderable, [
      'radio-directo',
      'instant-stream',
      'event-stream',
      'temporary-autodj',
      'audio-storage-api',
    ]);
    assert.deepEqual(
      snapshot.verdicts.get('radio-local')!.notOrderable.map((r) => r.code),
      ['not_agent_orderable', 'no_machine_payment'],
    );
  });

  test('concurrent evaluations all see every rule', async () => {
    const inputs = Array.from({ length: 300 }, (_, i) => ({
      duration_hours: 1 + (i % 700),
      ...stream,
      transfer_gb: i % 101,
    }));
    const results = await Promise.all(inputs.map((p) => price('event-stream', p)));
    results.forEach((e, i) => {
      const out = priced(e);
      assert.equal(out.lines.length, 3);
      assert.equal(out.total_atomic, String(250000 + 20000 * inputs[i].duration_hours + 15000 * inputs[i].transfer_gb));
    });
  });

  test('the same input gives byte-identical output and trace', async () => {
    const a = await price('temporary-autodj', {
      duration_hours: 100,
      storage_mb: 4000,
      bitrate_kbps: 64,
      transfer_gb: 1.5,
    });
    const b = await price('temporary-autodj', {
      duration_hours: 100,
      storage_mb: 4000,
      bitrate_kbps: 64,
      transfer_gb: 1.5,
    });
    assert.equal(JSON.stringify(a), JSON.stringify(b));
  });
});
