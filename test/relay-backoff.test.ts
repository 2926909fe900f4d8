import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, type Service } from './support/service.js';
import { relayCatalog, startRelayService } from './support/relay-catalog.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { buyerWallet } from './support/dev-file.js';

// A relay whose upstream answers 200 with bytes that are not audio is retried with a doubling wait, not twice a
// second forever, and the service record says why it is not streaming.
requireStreamingTools();

/** Half the production default of 1 s, so the test sees the doubling in half the time. */
const FIRST_RETRY_MS = 500;
/** What the test counts fetches in: twenty first waits (20 s with the default). */
const WINDOW_MS = 20 * FIRST_RETRY_MS;

let service: Service;
let catalog: Awaited<ReturnType<typeof relayCatalog>>;

before(async () => {
  ({ catalog, service } = await startRelayService({ RELAY_FIRST_RETRY_MS: String(FIRST_RETRY_MS) }));
});
after(async () => {
  await service?.stop();
  await catalog?.remove();
});

/** What serve logged about relays and its host's lease, for a failure to say why a wait was short. */
function relayLog(): string {
  return service
    .output()
    .split('\n')
    .filter((line) => /relay|lease|fenc|reconcile/i.test(line))
    .join('\n');
}

describe('relay upstream that is not audio', () => {
  test('is re-fetched with a doubling wait, and the service record says why', async () => {
    const fetchedAt: number[] = [];
    const garbage = Buffer.from('this is not audio, just text that no decoder accepts\n'.repeat(2000));
    const upstream = http
      .createServer((_req, res) => {
        fetchedAt.push(Date.now());
        res.writeHead(200, { 'content-type': 'audio/mpeg' });
        res.end(garbage);
      })
      .listen(0, '127.0.0.2');
    await once(upstream, 'listening');
    try {
      const wallet = await buyerWallet(service);
      const url = `http://127.0.0.2:${(upstream.address() as AddressInfo).port}/live.mp3`;
      const bought = await buy(service, wallet, {
        product_id: 'streaming-boost-relay',
        email: 'r@example.com',
        station_name: 'Relay',
        parameters: { duration_hours: 1, listeners: 5, bitrate_kbps: 64, source_stream_url: url },
      });
      assert.equal(bought.status, 200, JSON.stringify(bought.body));
      const id = bought.body.service.service_id;

      await waitFor('the first fetch', () => fetchedAt.length > 0, 20_000);
      // Five fetches (four waits), and the window of twenty first waits over, so the count in it is final.
      await waitFor('five fetches', () => fetchedAt.length >= 5, 60_000);
      await waitFor('the end of the window', () => Date.now() - fetchedAt[0] > WINDOW_MS, WINDOW_MS + 1000);
      // Waits of 1, 2, 4, 8 × the first: about five fetches in 20 × the first (without backoff, about ten or more).
      const within = fetchedAt.filter((t) => t - fetchedAt[0] <= WINDOW_MS).length;
      const times = fetchedAt.map((t) => t - fetchedAt[0]).join(', ');
      assert.ok(within >= 3 && within <= 7, `${within} fetches in the first ${WINDOW_MS} ms: ${times} ms`);
      const gaps = fetchedAt.slice(1).map((t, i) => t - fetchedAt[i]);
      assert.ok(gaps.at(-1)! > gaps[0] * 2, `the wait grows: gaps ${gaps.join(', ')} ms`);
      for (const [i, gap] of gaps.slice(0, 4).entries()) {
        const wait = FIRST_RETRY_MS * 2 ** i;
        assert.ok(gap >= wait, `wait ${i + 1} is at least ${wait} ms: gaps ${gaps.join(', ')} ms\n${relayLog()}`);
      }

      const record = (await request(service, 'GET', `/services/${id}`)).body;
      assert.equal(record.service.status, 'active');
      assert.match(
        record.status_reason,
        /The relay could not use http:\/\/127\.0\.0\.2:\d+\/live\.mp3: its audio could not be decoded/,
      );
      assert.match(record.status_reason, /Retrying in \d+ s \(attempt \d+; the wait doubles up to 5 min/);
      // One relay for the whole run of failures: never stopped and begun anew while its service is active.
      const started = service.output().match(new RegExp(`"service_id":"${id}"[^\n]*"msg":"relay started"`, 'g'));
      assert.equal(started?.length, 1, `the relay started once:\n${relayLog()}`);
      const events = (await request(service, 'GET', `/services/${id}/usage`)).body.usage.events;
      assert.equal(
        events.filter((e: any) => e.code === 'relay_upstream_failed').length,
        1,
        'one event for the run of failures, not one per retry',
      );
    } finally {
      upstream.close();
      upstream.closeAllConnections();
    }
  });
});
