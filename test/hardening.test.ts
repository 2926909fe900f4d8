import assert from 'node:assert/strict';
import { chmod, readdir } from 'node:fs/promises';
import http from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Metrics } from '../src/observability/index.js';
import type { Database } from '../src/store/index.js';
import { cli, request, scratchDir, startService, type Service } from './support/service.js';
import { buy } from './support/purchase.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

let service: Service;
let behindProxy: Service;

before(async () => {
  [service, behindProxy] = await Promise.all([
    startService(),
    startService({ PUBLIC_BASE_URL: 'https://audio.example.com/edge/' }),
  ]);
});
after(async () => {
  await Promise.all([service?.stop(), behindProxy?.stop()]);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const order = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Host FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};

/** POST /orders without payment, with a Host header of the caller's choosing (fetch does not allow setting it). */
function unpaidOrder(target: Service, host: string): Promise<{ status: number; paymentRequired?: string }> {
  const url = new URL(`${target.baseUrl}/orders`);
  const body = JSON.stringify(order);
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: {
          host,
          authorization: `Bearer ${target.apiKey}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'idempotency-key': `host-${Date.now()}-${Math.random()}`,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode!, paymentRequired: res.headers['payment-required'] as string | undefined }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('PAYMENT-REQUIRED resource.url', () => {
  test('is the listen address, whatever Host the client sends', async () => {
    const { status, paymentRequired } = await unpaidOrder(service, 'evil.example:666');
    assert.equal(status, 402);
    assert.equal(decodePaymentRequiredHeader(paymentRequired!).resource.url, `${service.baseUrl}/orders`);
  });

  test('is PUBLIC_BASE_URL when configured, and an agent pays and gets links there', async () => {
    const { status, paymentRequired } = await unpaidOrder(behindProxy, 'evil.example');
    assert.equal(status, 402);
    assert.equal(
      decodePaymentRequiredHeader(paymentRequired!).resource.url,
      'https://audio.example.com/edge/api/v1/orders',
    );

    const dev = await devFile(behindProxy);
    const paid = await buy(behindProxy, new TestWallet(dev.buyer.private_key, dev.chain.rpc_url), order);
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(
      paid.body.service.endpoints.service,
      `https://audio.example.com/edge/api/v1/services/${paid.body.service.service_id}`,
    );
  });
});

describe('metrics', () => {
  test('are served on their own loopback listener, not on the API port', async () => {
    assert.match(service.metricsUrl, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.notEqual(new URL(service.metricsUrl).port, new URL(service.baseUrl).port);
    const onApi = await fetch(new URL('/metrics', service.baseUrl));
    assert.equal(onApi.status, 404);
    assert.equal((await onApi.json()).error.code, 'route_not_found');
    await request(service, 'GET', '/products', { auth: false });
    const scraped = await fetch(service.metricsUrl);
    assert.equal(scraped.status, 200);
    assert.match(
      await scraped.text(),
      /^http_requests_total\{route="\/api\/v1\/products",method="GET",status="200"\} [1-9]/m,
    );
    assert.equal((await fetch(service.metricsUrl.replace('/metrics', '/other'))).status, 404);
  });

  test('the gauges read from PostgreSQL are cached between close scrapes', async () => {
    let queries = 0;
    const db = {
      query: async () => {
        queries++;
        return [{ state: 'active', status: 'active', n: 1 }];
      },
    } as unknown as Database;
    const metrics = new Metrics(db, { gaugeCacheMs: 60_000 });
    await metrics.registry.metrics();
    // Orders by state, services by status, listeners, services awaiting a move, and the streaming hosts (two gauges
    // share one cached query).
    assert.equal(queries, 5);
    await Promise.all([metrics.registry.metrics(), metrics.registry.metrics()]);
    assert.equal(queries, 5);
    const fresh = new Metrics(db, { gaugeCacheMs: 0 });
    await fresh.registry.metrics();
    await sleep(5);
    await fresh.registry.metrics();
    // Uncached, each host gauge reads the hosts itself: 6 queries a scrape.
    assert.equal(queries, 17);
  });
});

describe('a client that aborts its request', () => {
  test('is counted as 499 and logged at info level, not as a 500 error', async () => {
    const { hostname, port } = new URL(service.baseUrl);
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      [
        'POST /api/v1/quotes HTTP/1.1',
        `Host: ${hostname}:${port}`,
        `Authorization: Bearer ${service.apiKey}`,
        'Content-Type: application/json',
        'Content-Length: 1000',
        '',
        '{"product_id": "instant-st',
      ].join('\r\n'),
    );
    await sleep(300);
    socket.destroy();

    const deadline = Date.now() + 15_000;
    let text = '';
    while (!/status="499"/.test(text) && Date.now() < deadline) {
      await sleep(100);
      text = await (await fetch(service.metricsUrl)).text();
    }
    assert.match(text, /^http_requests_total\{route="\/api\/v1\/quotes",method="POST",status="499"\} 1$/m);
    assert.doesNotMatch(text, /status="500"/);
    const lines = service
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l));
    assert.ok(
      lines.some((l) => l.level === 'info' && l.status === 499 && l.route === '/api/v1/quotes'),
      'an info line with status 499',
    );
    assert.deepEqual(
      lines.filter((l) => l.level === 'error'),
      [],
    );
  });

  test('a body the service stops reading (too large, chunked) is still answered, not taken for an abort', async () => {
    const { hostname, port } = new URL(service.baseUrl);
    const socket = connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    let answer = '';
    socket.on('data', (d) => {
      answer += d;
    });
    socket.write(
      [
        'POST /api/v1/quotes HTTP/1.1',
        `Host: ${hostname}:${port}`,
        `Authorization: Bearer ${service.apiKey}`,
        'Content-Type: application/json',
        'Transfer-Encoding: chunked',
        '',
        '',
      ].join('\r\n'),
    );
    const chunk = 'x'.repeat(16 * 1024);
    for (let i = 0; i < 6 && !answer; i++) socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const deadline = Date.now() + 15_000;
    while (!answer.includes('}') && Date.now() < deadline) await sleep(50);
    socket.destroy();
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.match(answer, /"code":"body_too_large"/);
  });
});

describe('running as root', { skip: process.getuid?.() !== 0 && 'only root hands PostgreSQL to its own user' }, () => {
  test('a DATA_DIR under a directory only root can enter stops serve with one sentence that says what to change', async () => {
    const home = await scratchDir('audio-root-home-');
    await chmod(home, 0o700);
    const dataDir = join(home, 'data');
    const result = await cli(['serve'], { DATA_DIR: dataDir, PORT: '0' });
    assert.equal(result.code, 1, result.stdout);
    const [error] = result.stderr.split('\n').filter((l) => l.startsWith('error: '));
    assert.equal(
      error,
      `error: DATA_DIR ${dataDir} is inside ${home} (mode 0700), which the postgres and icecast2 users cannot enter when serve runs as root: set DATA_DIR to a directory outside it (e.g. /var/lib/agent-audio), or allow passing through with "chmod o+x ${home}"`,
    );
    assert.doesNotMatch(result.stderr, /initdb/);
    assert.deepEqual(await readdir(dataDir).catch(() => []), [], 'nothing was started in DATA_DIR');
  });
});
