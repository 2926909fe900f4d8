import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { openSnapshot, readSnapshotFiles, type Snapshot } from '../src/pricing/index.js';
import { Stage } from '../src/rules/index.js';
import { usageDecidingRules } from '../src/services/decision-key.js';
import { root } from './support/service.js';

// A life-cycle pass runs the rules for a service again only when the facts that decide them changed. The transfer
// used grows every pass while listeners are held; it stands in the key as the outcome of its comparisons, so the key
// changes when it passes what was bought, not on every byte. Held against json-rules-engine itself: two usages of one
// key fire the same rules.
let shipped: Snapshot;

before(async () => {
  const opened = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
  assert.deepEqual(opened.diagnostics, []);
  shipped = opened.snapshot!;
});

const service = {
  id: 'svc_key',
  status: 'active',
  product_id: 'event-stream',
  expires_at: '2099-01-01T00:00:00.000Z',
  expired: false,
  bitrate_kbps: 64,
  autodj: false,
};

async function fired(stage: Stage, usage: Record<string, unknown>): Promise<string> {
  const product = shipped.catalog.byId.get('event-stream')!.product;
  const { decisions } = await stage.evaluate({ service, usage, product, settings: shipped.catalog.settings }, 6);
  return JSON.stringify(decisions.map((d) => [d.kind, d.to, d.code]));
}

test('usages with one key fire the same life-cycle rules, and a growing transfer keeps its key', async () => {
  const stage = shipped.rules.lifecycle;
  const byKey = new Map<string, { fired: string; usage: unknown }>();
  let usages = 0;
  for (const included of ['0', '1', '10'])
    for (const used of ['0', '0.5', '0.999999', '1', '1.000001', '9.99', '10', '10.000001', '25'])
      for (const overBitrate of [false, true])
        for (const listeners of [0, 7]) {
          const usage = {
            listeners,
            transfer_used_gb: used,
            transfer_included_gb: included,
            source_over_bitrate: overBitrate,
            source_connected: true,
          };
          const key = JSON.stringify(usageDecidingRules(stage, usage));
          const outcome = await fired(stage, usage);
          const seen = byKey.get(key);
          if (seen) assert.equal(outcome, seen.fired, `${JSON.stringify(usage)} and ${JSON.stringify(seen.usage)}`);
          else byKey.set(key, { fired: outcome, usage });
          usages++;
        }
  assert.ok(byKey.size < usages / 4, `${byKey.size} keys for ${usages} usages`);
  const key = (used: string, included = '10') =>
    JSON.stringify(usageDecidingRules(stage, { transfer_used_gb: used, transfer_included_gb: included }));
  assert.equal(key('0.1'), key('0.2'), 'a transfer that grew below what was bought');
  assert.notEqual(key('9.9'), key('10.1'), 'one that passed it');
  assert.equal(key('0.1', '0'), key('250', '0'), 'a transfer without a bound');
});

test('a figure read other than by a decimal comparison keeps its value in the key', () => {
  const rule = (name: string, conditions: unknown[]) => ({
    name,
    conditions: { all: conditions },
    event: { type: 'enforce' as const, params: { sequence: 1, code: name, reason: name, actions: [] } },
  });
  const stage = new Stage(
    [
      rule('over', [
        {
          fact: 'usage',
          path: 'transfer_used_gb',
          operator: 'decimalGreaterThan',
          value: { fact: 'usage', path: 'transfer_included_gb' },
        },
      ]),
      rule('many', [{ fact: 'usage', path: 'transfer_included_gb', operator: 'greaterThan', value: 5 }]),
      rule('late', [{ fact: 'usage', path: 'listener_hours', operator: 'decimalGreaterThan', value: '2' }]),
    ],
    [],
  );
  const read = usageDecidingRules(stage, { transfer_used_gb: '1', transfer_included_gb: '3', listener_hours: '1' });
  // transfer_included_gb is also read by `greaterThan`; the comparison that reads it therefore keeps both values.
  assert.deepEqual(read, { transfer_used_gb: '1', transfer_included_gb: '3', '(comparisons)': [false] });
});
