import assert from 'node:assert/strict';
import { join } from 'node:path';
import { evaluatePrice, openSnapshot, readSnapshotFiles, type PriceInput } from '../src/pricing/index.js';
import { baselineInstantStreamPrice } from './baseline-price.js';
import { timeCalls, type TimingStats } from './timing.js';

export const instantStreamInput: PriceInput = {
  product_id: 'instant-stream',
  parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 },
};
export const temporaryAutodjInput: PriceInput = {
  product_id: 'temporary-autodj',
  parameters: { duration_hours: 24, bitrate_kbps: 64, storage_mb: 1024 },
};

export interface MicroResults {
  overhead: TimingStats;
  baseline: TimingStats;
  instantStream: TimingStats;
  temporaryAutodj: TimingStats;
}

/** One quote evaluation (evaluatePrice on a real snapshot) against a hand-written decimal.js equivalent. */
export async function runMicro(root: string, warmup: number, measured: number): Promise<MicroResults> {
  const { snapshot, diagnostics } = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
  assert.ok(snapshot, `the catalog does not open: ${JSON.stringify(diagnostics)}`);

  const evaluated = await evaluatePrice(snapshot, instantStreamInput);
  assert.equal(evaluated.outcome, 'priced', 'instant-stream is not priced');
  const expected = baselineInstantStreamPrice(instantStreamInput.parameters);
  assert.deepEqual(
    { total_atomic: evaluated.output.total_atomic, amount: evaluated.output.amount },
    expected,
    'the baseline and evaluatePrice disagree',
  );
  assert.equal(
    (await evaluatePrice(snapshot, temporaryAutodjInput)).outcome,
    'priced',
    'temporary-autodj is not priced',
  );

  return {
    overhead: await timeCalls(() => undefined, warmup, measured),
    baseline: await timeCalls(() => baselineInstantStreamPrice(instantStreamInput.parameters), warmup, measured),
    instantStream: await timeCalls(() => evaluatePrice(snapshot, instantStreamInput), warmup, measured),
    temporaryAutodj: await timeCalls(() => evaluatePrice(snapshot, temporaryAutodjInput), warmup, measured),
  };
}
