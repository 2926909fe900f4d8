// The HLS totals a host shows are what hls_usage holds for its services (saved by this host, or by the host a service
// moved from) plus what it has not saved yet. They are read again when this host saved some, and when a service new to
// the host is asked about, not on every pass while nothing changes them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HlsUsageTotals } from '../src/hls/usage-totals.js';
import type { HlsSessions } from '../src/hls/sessions.js';
import type { Database } from '../src/store/index.js';

const row = (service_id: string, bytes: number) => ({
  service_id,
  bytes_sent: String(bytes),
  listener_ms: '0',
  sessions: 1,
  peak_listeners: 1,
});

test('saved totals are read when this host saved some or a service is new here, not on every pass', async () => {
  const stored = [row('svc_a', 1_000)];
  const statements: string[] = [];
  const db = {
    query: async (sql: string) => {
      statements.push(sql.trim().split(/\s+/)[0]);
      return sql.includes('SELECT h.*') ? stored : [];
    },
  } as unknown as Database;
  let delta = new Map<string, { bytes: number; listenerMs: number; sessions: number }>();
  const sessions = {
    takeUsage: () => [delta, (delta = new Map())][0],
    restore: () => {},
    unsaved: () => ({ bytes: 0, listenerMs: 0, sessions: 0 }),
    openOf: () => ({ count: 0, listenerMs: 0 }),
  } as unknown as HlsSessions;
  const totals = new HlsUsageTotals(db, sessions, () => 'host_1');

  await totals.save();
  assert.equal(totals.of('svc_a', 0, 0).bytes, 1_000);
  await totals.save();
  assert.equal(totals.of('svc_a', 0, 0).bytes, 1_000);
  const read = statements.length;
  for (let pass = 0; pass < 5; pass++) {
    await totals.save();
    totals.of('svc_a', 0, 0);
  }
  assert.equal(statements.length, read, `nothing changed, nothing read: ${statements.slice(read)}`);

  // A service moved here with the totals its previous host saved: shown from the next pass.
  stored.push(row('svc_b', 5_000));
  assert.equal(totals.of('svc_b', 0, 0).bytes, 0);
  await totals.save();
  assert.equal(totals.of('svc_b', 0, 0).bytes, 5_000);

  // This host's own listeners: saved, then read back.
  delta = new Map([['svc_a', { bytes: 250, listenerMs: 0, sessions: 0 }]]);
  stored[0] = row('svc_a', 1_250);
  const before = statements.length;
  await totals.save();
  assert.deepEqual(statements.slice(before), ['INSERT', 'SELECT']);
  assert.equal(totals.of('svc_a', 0, 0).bytes, 1_250);
});
