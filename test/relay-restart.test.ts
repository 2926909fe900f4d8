import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { Logger } from '../src/log/index.js';
import { RelayManager, type ServiceRow } from '../src/services/index.js';
import { treatAsPublic } from '../src/ssrf/index.js';
import type { Database } from '../src/store/index.js';
import { waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// The host reconciler stops a relay and starts it again when its lease runs out for a moment or its service moves away
// and back: the new relay goes on from the wait the failing upstream earned, it does not fetch at once from attempt 1.
requireStreamingTools();

const FIRST_RETRY_MS = 400;
const fetchedAt: number[] = [];
const failures: number[] = [];
let upstream: http.Server;

before(async () => {
  treatAsPublic(['127.0.0.2']);
  const garbage = Buffer.from('this is not audio\n'.repeat(4000));
  upstream = http.createServer((_req, res) => {
    fetchedAt.push(Date.now());
    res.writeHead(200, { 'content-type': 'audio/mpeg' });
    res.end(garbage);
  });
  upstream.listen(0, '127.0.0.2');
  await once(upstream, 'listening');
});
after(() => {
  treatAsPublic([]);
  upstream?.close();
  upstream?.closeAllConnections();
});

test('a relay started again keeps the doubling wait of its failing upstream', async () => {
  const log: Logger = {
    info: () => {},
    warn: (fields) => void failures.push(Number(fields.retry_in_ms)),
    error: () => {},
  };
  const db = { query: async () => [] } as unknown as Database;
  const relays = new RelayManager(db, () => 'http://127.0.0.1:9', log, FIRST_RETRY_MS);
  const port = (upstream.address() as AddressInfo).port;
  const service = {
    id: 'svc_relay_restart',
    status: 'active',
    mount: '/live-restart',
    source_password: 'secret',
    limits: { source_stream_url: `http://127.0.0.2:${port}/live.mp3`, bitrate_kbps: 64 },
  } as unknown as ServiceRow;
  try {
    await relays.sync([service]);
    await waitFor('two failed sessions', () => failures.length >= 2, 20_000);
    // Stopped and started again during the second wait (2 × the first).
    await relays.sync([]);
    const stoppedAt = Date.now();
    await relays.sync([service]);
    await waitFor('the third session', () => failures.length >= 3, 20_000);
    assert.equal(fetchedAt.length, 3, `one fetch per session: ${fetchedAt.length}`);
    assert.deepEqual(failures, [FIRST_RETRY_MS, 2 * FIRST_RETRY_MS, 4 * FIRST_RETRY_MS], 'the wait went on doubling');
    const third = fetchedAt[2] - fetchedAt[1];
    assert.ok(third >= 2 * FIRST_RETRY_MS, `the started relay waited out the second wait: ${third} ms`);
    assert.ok(fetchedAt[2] > stoppedAt, 'the third fetch is the new relay');
  } finally {
    await relays.stopAll();
  }
});
