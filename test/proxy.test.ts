import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { cli, startService, type Service } from './support/service.js';

// 127.0.0.3 plays a reverse proxy; 127.0.0.4 a client that talks to the service directly.
const PROXY = '127.0.0.3';
let service: Service;

before(async () => {
  service = await startService({ TRUSTED_PROXIES: PROXY, RATE_LIMIT_PER_IP: '1', RATE_LIMIT_PER_KEY: '0' });
});
after(async () => {
  await service?.stop();
});

/** Statuses of GET /products (or `path`) sent one after another from `from`, each with this X-Forwarded-For. */
async function statuses(from: string, forwardedFor: string[], path = '/products'): Promise<number[]> {
  const url = new URL(`${service.baseUrl}${path}`);
  const out: number[] = [];
  for (const header of forwardedFor) {
    out.push(
      await new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            localAddress: from,
            agent: false,
            headers: { 'x-forwarded-for': header },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end();
      }),
    );
  }
  return out;
}

test('behind a trusted proxy each client has its own per-address limit; elsewhere X-Forwarded-For is ignored', async () => {
  // 1 request/s with bursts of 2: the third in a row from one client is refused.
  assert.deepEqual(await statuses(PROXY, ['203.0.113.7', '203.0.113.7', '203.0.113.7']), [200, 200, 429]);
  assert.deepEqual(await statuses(PROXY, ['203.0.113.8']), [200], 'another client behind the same proxy');
  assert.deepEqual(
    await statuses(PROXY, ['198.51.100.1, 203.0.113.7']),
    [429],
    "what the client wrote left of the proxy's entry does not count",
  );
  assert.deepEqual(
    await statuses('127.0.0.4', ['192.0.2.1', '192.0.2.2', '192.0.2.3']),
    [200, 200, 429],
    'a direct client cannot pick its address',
  );
});

test('an IPv6 client is counted by its /64: other addresses of the same network share its limit', async () => {
  assert.deepEqual(
    await statuses(PROXY, ['2001:db8:5:6::1', '2001:db8:5:6::2', '2001:db8:5:6:a:b:c:d']),
    [200, 200, 429],
    'three addresses of one /64 are one client',
  );
  assert.deepEqual(await statuses(PROXY, ['2001:db8:5:7::1']), [200], 'the next /64 is another client');
});

test('the public listen pages and their JSON are rate limited per client like every route', async () => {
  const page = '/listen/svc_nosuchservice00000';
  assert.deepEqual(await statuses(PROXY, ['203.0.113.20', '203.0.113.20', '203.0.113.20'], page), [404, 404, 429]);
  const json = `${page}/now-playing`;
  assert.deepEqual(await statuses(PROXY, ['203.0.113.21', '203.0.113.21', '203.0.113.21'], json), [404, 404, 429]);
});

test('TRUSTED_PROXIES must list addresses', async () => {
  const refused = await cli(['serve'], {
    TRUSTED_PROXIES: '10.0.0.2,proxy.local',
    DATA_DIR: join(service.dataDir, 'unused'),
  });
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /TRUSTED_PROXIES must be IP addresses separated by commas, e\.g\. 10\.0\.0\.2,10\.0\.0\.3, got "proxy\.local"/,
  );
});
