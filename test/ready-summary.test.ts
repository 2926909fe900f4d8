import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configFromEnv } from '../src/cli/config.js';
import { readySummary } from '../src/cli/ready-summary.js';

// What serve prints once it is up: an API's address, or for a streaming host what it really serves (no API).

const config = configFromEnv({ DATA_DIR: '/tmp/ready-summary-data' });
const stop = async () => {};

test('an API instance prints the API it serves', () => {
  const api = { baseUrl: 'http://127.0.0.1:3000/api/v1', metricsUrl: 'http://127.0.0.1:9464/metrics', stop };
  const { lines, fields } = readySummary(config, api, 1.23);
  assert.equal(lines[0], 'serving on http://127.0.0.1:3000/api/v1');
  assert.equal(lines[1], 'metrics on http://127.0.0.1:9464/metrics');
  assert.equal(fields.base_url, 'http://127.0.0.1:3000/api/v1');
});

test('a streaming host prints its Icecast, not an API address', () => {
  const host = {
    baseUrl: 'http://127.0.0.1:3001/api/v1',
    metricsUrl: 'http://127.0.0.1:9465/metrics',
    icecastUrl: 'http://127.0.0.1:8000',
    streamingHost: { id: 'pool-a' },
    stop,
  };
  const { lines, fields } = readySummary({ ...config, role: 'host' }, host, 1.23);
  assert.match(lines[0], /^streaming on http:\/\/127\.0\.0\.1:8000 \(streaming host pool-a: /);
  assert.ok(!lines.some((line) => line.includes('/api/v1')), lines.join('\n'));
  assert.equal(lines[1], 'metrics on http://127.0.0.1:9465/metrics');
  assert.equal(fields.base_url, undefined);
  assert.equal(fields.streaming_host, 'pool-a');
  assert.equal(fields.icecast_url, 'http://127.0.0.1:8000');
  assert.equal(fields.streaming_proxy, 'haproxy');
  assert.ok(lines.includes('  Icecast    http://127.0.0.1:8000 (through HAProxy)'), lines.join('\n'));
});

test("the summary says what carries the listeners: HAProxy by default, else serve's front door", () => {
  const host = { baseUrl: 'http://127.0.0.1:3001/api/v1', metricsUrl: 'm', icecastUrl: 'http://127.0.0.1:8000', stop };
  const frontDoor = configFromEnv({ DATA_DIR: '/tmp/ready-summary-data', ICECAST_PROXY: 'front-door' });
  const { lines, fields } = readySummary(frontDoor, host, 1);
  assert.equal(fields.streaming_proxy, 'front-door');
  assert.ok(lines.includes("  Icecast    http://127.0.0.1:8000 (through serve's front door)"), lines.join('\n'));
});
