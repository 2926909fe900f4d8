// A host too busy to answer Icecast's stats for longer than the bitrate window (SIGSTOP: a burst of listeners left
// them unanswered for 40 s in the capacity benchmark) must not cut a source that kept to its bitrate when the readings
// come back with the whole stall's bytes at once. Real HTTP, chain, PostgreSQL, HAProxy, Icecast and ffmpeg.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { buyerWallet } from './support/dev-file.js';
import { descendantsOf } from './support/processes.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { liveSine } from './support/tones.js';

requireStreamingTools();
const WINDOW_SECONDS = 10;
/** Longer than the window: the old budget charged the stall's bytes against at most one window of refill. */
const STALL_SECONDS = 16;

let service: Service;
let source: ChildProcess | undefined;
let stalled: number | undefined;

before(async () => {
  service = await startService({ SOURCE_BITRATE_WINDOW_SECONDS: String(WINDOW_SECONDS), LIFECYCLE_INTERVAL_MS: '250' });
});
after(async () => {
  if (process.env.DEBUG_STALL) console.log(service?.output());
  if (stalled) process.kill(stalled, 'SIGCONT');
  source?.kill('SIGKILL');
  await service?.stop();
});

const usage = async (id: string) => (await request(service, 'GET', `/services/${id}/usage`)).body.usage;

test('a source at its bitrate is not cut when Icecast answers its stats late', { timeout: 120_000 }, async () => {
  const wallet = await buyerWallet(service);
  const bought = await buy(service, wallet, {
    product_id: 'instant-stream',
    email: 'ops@example.com',
    station_name: 'Stall FM',
    parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 32 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  const id = bought.body.service.service_id as string;
  source = liveSine(bought.body.service.broadcast_url, { kbps: 32 });
  let stderr = '';
  source.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-2000);
  });
  await waitFor('the source counted', async () => (await usage(id)).bytes.read_from_source > 0, 30_000);
  await sleep(6000); // a reading or two at the steady rate

  const icecast = descendantsOf(service.process.pid!).find((p) => p.name === 'icecast2');
  assert.ok(icecast, 'serve runs Icecast');
  const before = await usage(id);
  stalled = icecast.pid;
  process.kill(icecast.pid, 'SIGSTOP');
  await sleep(STALL_SECONDS * 1000);
  process.kill(icecast.pid, 'SIGCONT');
  stalled = undefined;
  const resumed = Date.now();

  // Icecast counts what it read in 5 s steps: wait for a reading that holds the stall's bytes.
  const stallBytes = STALL_SECONDS * 4000 * 0.8;
  const latest = await waitFor(
    'a reading after the stall',
    async () => {
      const u = await usage(id);
      return u.bytes.read_from_source - before.bytes.read_from_source >= stallBytes && u;
    },
    30_000,
  );
  await sleep(2000); // passes of the life-cycle worker on that reading
  const warned = service.output().includes('could not read Icecast usage');
  assert.ok(warned, 'the stats went unanswered during the stall');
  assert.equal(source.exitCode, null, `the source was disconnected: ${stderr}`);
  const after = await usage(id);
  assert.ok(
    !after.events.some((e: { code: string }) => e.code === 'source_over_bitrate'),
    JSON.stringify(after.events),
  );
  assert.equal(after.source.connected, true);
  assert.ok(after.source.bitrate_budget.remaining_bytes > 0, JSON.stringify(after.source));
  const record = (await request(service, 'GET', `/services/${id}`)).body.service;
  assert.equal(record.status, 'active', record.status_reason);
  console.log(
    `stall of ${STALL_SECONDS} s: ${latest.bytes.read_from_source - before.bytes.read_from_source} bytes read at once ` +
      `${Date.now() - resumed} ms after; budget left ${after.source.bitrate_budget.remaining_bytes} of ` +
      `${after.source.bitrate_budget.capacity_bytes}`,
  );
});
