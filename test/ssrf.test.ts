import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { nonPublicAddress, publicHttpOnly, RefusedUrl, safeGet, type Resolver } from '../src/ssrf/index.js';
import { buy } from './support/purchase.js';
import { request, type Service } from './support/service.js';
import { relayCatalog, startRelayService } from './support/relay-catalog.js';
import { connectListener, hasMpegFrame, waitFor } from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';
import { mp3, sine } from './support/tones.js';
import { buyerWallet } from './support/dev-file.js';

requireStreamingTools();

describe('URL policy public_http_https_only', () => {
  test('only public addresses pass', () => {
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:8.8.8.8',
      'fe80::1',
      'fc00::1',
      'fd12::1',
      'ff02::1',
      '2001:db8::1',
      '64:ff9b::7f00:1',
    ]) {
      assert.ok(nonPublicAddress(address), `${address} is refused`);
    }
    for (const address of ['8.8.8.8', '93.184.216.34', '1.1.1.1', '2606:4700:4700::1111'])
      assert.equal(nonPublicAddress(address), undefined, address);
  });

  test('IPv6 forms that embed an IPv4 address are judged by the embedded address', async () => {
    const loopback = {
      '::7f00:1': 'IPv4-compatible',
      '::127.0.0.1': 'IPv4-compatible',
      '::ffff:0:7f00:1': 'IPv4-translated',
      '::ffff:0:127.0.0.1': 'IPv4-translated',
      '::ffff:7f00:1': 'IPv4-mapped',
      '64:ff9b::7f00:1': 'NAT64',
      '64:ff9b:1:7f00:0:100::': 'NAT64 (local-use prefix)',
      '2002:7f00:1::1': '6to4',
      '2001:0:4136:e378:8000:63bf:80ff:fffe': 'Teredo client',
    };
    for (const [address, form] of Object.entries(loopback)) {
      assert.match(
        nonPublicAddress(address) ?? '',
        new RegExp(`embeds the IPv4 address 127\\.0\\.0\\.1 \\(${form.replace(/[()]/g, '\\$&')}\\)`),
        address,
      );
    }
    assert.match(nonPublicAddress('64:ff9b:1::7f00:1') ?? '', /NAT64 \(local-use prefix\)/);
    assert.match(nonPublicAddress('::a9fe:a9fe') ?? '', /169\.254\.169\.254/);
    assert.match(nonPublicAddress('2002:a00:1::') ?? '', /10\.0\.0\.1 \(6to4\)/);
    // Embedding a public address does not make a transition form acceptable.
    for (const address of ['::808:808', '::ffff:0:808:808', '2002:808:808::1'])
      assert.ok(nonPublicAddress(address), address);
    assert.match(nonPublicAddress('::1') ?? '', /not a public address/);

    const policy = publicHttpOnly({
      resolve: async () => {
        throw new Error('no DNS needed');
      },
    });
    for (const host of [
      '[::7f00:1]',
      '[::127.0.0.1]',
      '[::ffff:0:7f00:1]',
      '[64:ff9b::127.0.0.1]',
      '[2002:7f00:1::]',
    ]) {
      assert.match((await policy.refuse(`http://${host}:8000/live`)) ?? '', /127\.0\.0\.1/, host);
    }
  });

  test('scheme, credentials and every resolved address are checked', async () => {
    const dns: Record<string, string[]> = {
      'stream.example': ['93.184.216.34'],
      'inside.example': ['10.0.0.5'],
      'mixed.example': ['93.184.216.34', '127.0.0.1'],
      'v6.example': ['::ffff:169.254.169.254'],
    };
    const policy = publicHttpOnly({
      resolve: async (host) => {
        if (!dns[host]) throw new Error('NXDOMAIN');
        return dns[host];
      },
    });
    assert.equal(await policy.refuse('https://stream.example/live.mp3'), undefined);
    assert.equal(await policy.refuse('http://93.184.216.34:8000/live'), undefined);
    const refused = {
      'ftp://stream.example/x': /only http and https/,
      'file:///etc/passwd': /only http and https/,
      'http://user:secret@stream.example/': /credentials/,
      'http://inside.example/': /not a public address/,
      'http://mixed.example/': /127\.0\.0\.1/,
      'http://v6.example/': /IPv4-mapped/,
      'http://[::1]:8000/': /not a public address/,
      'http://169.254.169.254/latest/meta-data/': /not a public address/,
      'http://nowhere.example/': /does not resolve/,
      'not a url': /not an absolute URL/,
    };
    for (const [url, reason] of Object.entries(refused))
      assert.match((await policy.refuse(url)) ?? 'allowed', reason, url);
  });

  describe('at connect time and on redirects', () => {
    const servers: http.Server[] = [];
    after(() => {
      for (const s of servers) s.close();
    });
    async function serve(host: string, handler: http.RequestListener): Promise<number> {
      const server = http.createServer(handler).listen(0, host);
      servers.push(server);
      await once(server, 'listening');
      return (server.address() as AddressInfo).port;
    }
    // Only 127.0.0.2 counts as "public" here, so every request stays on this machine.
    const onlyTwo = (address: string) => (address === '127.0.0.2' ? undefined : `${address} is not allowed`);

    test('a redirect to a forbidden address is refused', async () => {
      const inner = await serve('127.0.0.1', (_req, res) => res.end('secret'));
      const outer = await serve('127.0.0.2', (_req, res) => {
        res.writeHead(302, { location: `http://127.0.0.1:${inner}/admin` });
        res.end();
      });
      const policy = publicHttpOnly({ resolve: async () => ['127.0.0.2'], checkAddress: onlyTwo });
      await assert.rejects(
        safeGet(`http://127.0.0.2:${outer}/stream`, policy),
        (e: Error) => e instanceof RefusedUrl && /127\.0\.0\.1/.test(e.message),
      );
      const fine = await safeGet(
        `http://127.0.0.2:${outer}/stream`.replace('/stream', '/'),
        publicHttpOnly({ resolve: async () => ['127.0.0.2'], checkAddress: () => undefined }),
      );
      fine.resume();
    });

    test('a name that resolves differently when connecting (DNS rebinding) is refused', async () => {
      const port = await serve('127.0.0.1', (_req, res) => res.end('secret'));
      let calls = 0;
      const rebinding: Resolver = async () => (calls++ === 0 ? ['127.0.0.2'] : ['127.0.0.1']);
      const policy = publicHttpOnly({ resolve: rebinding, checkAddress: onlyTwo });
      await assert.rejects(safeGet(`http://relay.test:${port}/stream`, policy), (e: Error) =>
        /at connect time/.test(e.message),
      );
      assert.equal(calls, 2, 'checked once before and once while connecting');
    });
  });
});

describe('streaming-boost-relay made orderable in a test catalog', () => {
  let service: Service;
  let catalog: Awaited<ReturnType<typeof relayCatalog>>;
  before(async () => {
    ({ catalog, service } = await startRelayService());
  });
  after(async () => {
    await service?.stop();
    await catalog?.remove();
  });

  test('orders with a source URL that is not public http(s) are refused with a pointer, before any payment', async () => {
    const order = (url: string) =>
      request(service, 'POST', '/orders', {
        body: {
          product_id: 'streaming-boost-relay',
          email: 'r@example.com',
          station_name: 'Relay',
          parameters: { duration_hours: 1, listeners: 5, bitrate_kbps: 64, source_stream_url: url },
        },
        headers: { 'idempotency-key': `relay-${Math.random()}` },
      });
    for (const url of [
      'http://127.0.0.1:8000/live',
      'http://localhost:8000/live',
      'http://10.0.0.1/live',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:127.0.0.1]/x',
      'http://user:pw@8.8.8.8/live',
      'ftp://8.8.8.8/live',
      'http://100.64.1.1/x',
      'http://224.0.0.1/x',
    ]) {
      const answer = await order(url);
      assert.equal(answer.status, 422, `${url}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'url_not_allowed');
      assert.equal(answer.body.error.details[0].pointer, '/parameters/source_stream_url');
      assert.equal(answer.headers.get('payment-required'), null, 'no payment is asked for');
    }
    const publicIp = await order('http://8.8.8.8:8000/live');
    assert.equal(publicIp.status, 402, 'a public address is accepted and priced (nothing connects to it here)');
  });

  test('a paid relay pulls its upstream into the mount; a redirect to a forbidden address is refused when connecting', async () => {
    const song = await sine({ seconds: 30, frequency: 330 }, mp3());
    const inner = http.createServer((_req, res) => res.end('internal')).listen(0, '127.0.0.1');
    await once(inner, 'listening');
    const upstream = http
      .createServer((req, res) => {
        if (req.url === '/moved') {
          res.writeHead(302, { location: `http://127.0.0.1:${(inner.address() as AddressInfo).port}/admin` });
          res.end();
          return;
        }
        res.writeHead(200, { 'content-type': 'audio/mpeg' });
        let offset = 0;
        const pace = setInterval(() => {
          if (offset >= song.length) {
            clearInterval(pace);
            res.end();
            return;
          }
          res.write(song.subarray(offset, (offset += 1600)));
        }, 200);
        res.on('close', () => clearInterval(pace));
      })
      .listen(0, '127.0.0.2');
    await once(upstream, 'listening');
    const port = (upstream.address() as AddressInfo).port;
    try {
      const wallet = await buyerWallet(service);
      const relayOrder = (url: string) =>
        buy(service, wallet, {
          product_id: 'streaming-boost-relay',
          email: 'r@example.com',
          station_name: 'Relay',
          parameters: { duration_hours: 1, listeners: 5, bitrate_kbps: 64, source_stream_url: url },
        });

      const relayed = await relayOrder(`http://127.0.0.2:${port}/live.mp3`);
      assert.equal(relayed.status, 200, JSON.stringify(relayed.body));
      const listener = await waitFor(
        'the relayed mount',
        async () => {
          const l = await connectListener(relayed.body.service.stream_url).catch(() => undefined);
          if (l?.status === 200) return l;
          l?.close();
          return undefined;
        },
        20_000,
      );
      await waitFor(
        'relayed audio',
        () => hasMpegFrame(listener.received()) && listener.received().length > 4000,
        15_000,
      );
      listener.close();

      const redirected = await relayOrder(`http://127.0.0.2:${port}/moved`);
      assert.equal(redirected.status, 200, 'the first hop is public, so the order is taken');
      const events = await waitFor(
        'the refusal on record',
        async () => {
          const u = (await request(service, 'GET', `/services/${redirected.body.service.service_id}/usage`)).body.usage;
          return u.events.some((e: any) => e.code === 'relay_url_refused') ? u.events : undefined;
        },
        15_000,
      );
      assert.match(events.find((e: any) => e.code === 'relay_url_refused').reason, /127\.0\.0\.1/);
    } finally {
      upstream.close();
      inner.close();
    }
  });
});
