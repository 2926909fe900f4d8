import assert from 'node:assert/strict';
import { test } from 'node:test';
import { USAGE_GROWTH_SHOWN, USAGE_REFRESH_MS, usageWorthWriting } from '../src/services/usage-write.js';

const at = Date.parse('2026-01-01T00:00:00Z');
const stored = {
  listeners: 2,
  peak_listeners: 2,
  listener_hours: '0.5',
  bytes_sent: 1_000_000,
  bytes_read: 500_000,
  transfer_used_gb: '0.001',
  source_connected: true,
  source_since: '2026-01-01T00:00:00Z',
  source_kbps: 64,
  source_over_bitrate: false,
  source_budget: { capacity_bytes: 240_000, remaining_bytes: 230_000, refused_until: null, state: { level: 230_000 } },
  measured_at: new Date(at).toISOString(),
};
/** The same service a pass later: its listeners and source went on streaming. */
const grown = {
  ...stored,
  listener_hours: '0.5006',
  bytes_sent: 1_016_000,
  bytes_read: 508_000,
  transfer_used_gb: '0.001016',
  source_kbps: 63.8,
  source_budget: { ...stored.source_budget, remaining_bytes: 228_000, state: { level: 228_000 } },
};

test('a held listener and a live source growing: written only once the row is due for a refresh', () => {
  assert.equal(usageWorthWriting(stored, grown, at + 1000), false);
  assert.equal(usageWorthWriting(stored, grown, at + USAGE_REFRESH_MS - 1), false);
  assert.equal(usageWorthWriting(stored, grown, at + USAGE_REFRESH_MS), true);
});

test('nothing changed: never written, however old the row', () => {
  assert.equal(usageWorthWriting(stored, { ...stored, measured_at: 'later' }, at + 10 * USAGE_REFRESH_MS), false);
});

test('what a reader sees change is written at once', () => {
  const soon = at + 1000;
  assert.equal(usageWorthWriting(null, grown, soon), true, 'a first usage');
  assert.equal(usageWorthWriting(stored, { ...grown, listeners: 1 }, soon), true, 'a listener left');
  assert.equal(usageWorthWriting(stored, { ...grown, peak_listeners: 3 }, soon), true, 'a new peak');
  assert.equal(usageWorthWriting(stored, { ...grown, source_connected: false }, soon), true, 'the source left');
  assert.equal(usageWorthWriting(stored, { ...grown, source_over_bitrate: true }, soon), true, 'over its bitrate');
  const refused = { ...grown.source_budget, refused_until: '2026-01-01T00:01:00Z' };
  assert.equal(usageWorthWriting(stored, { ...grown, source_budget: refused }, soon), true, 'refused until');
});

test('the last bytes of listeners who left, or of a source that ended, and a figure leaving zero are written at once', () => {
  const soon = at + 1000;
  const idle = { ...stored, listeners: 0, source_connected: false, source_kbps: null };
  assert.equal(usageWorthWriting(idle, { ...idle, bytes_sent: 1_004_000, transfer_used_gb: '0.001004' }, soon), true);
  assert.equal(usageWorthWriting(idle, { ...idle, bytes_read: 501_000 }, soon), true);
  const fresh = { ...stored, bytes_sent: 0, transfer_used_gb: '0', listener_hours: '0' };
  assert.equal(usageWorthWriting(fresh, grown, soon), true, 'the first bytes sent');
});

test('a total that grew by more than its share (a young stream) is written at once', () => {
  const soon = at + 1000;
  const more = Math.round(stored.bytes_read * (1 + USAGE_GROWTH_SHOWN)) + 1;
  assert.equal(usageWorthWriting(stored, { ...grown, bytes_read: more }, soon), true);
  const hours = (Number(stored.listener_hours) * (1 + USAGE_GROWTH_SHOWN) + 0.001).toFixed(6);
  assert.equal(usageWorthWriting(stored, { ...grown, listener_hours: hours }, soon), true);
});
