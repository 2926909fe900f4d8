import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { npmScratch, run } from './support/npm-scratch.js';
import { devFile } from './support/dev-file.js';
import { request, root, scratchDir, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';

// Every x402 client pays or is told why: the real clients, installed from npm, against the real service. x402 v1
// clients fail with a readable reason and pay nothing; the v2 client pays; agentcash finds the paid endpoints;
// openapi-typescript types a client that compiles only with the right parameters; Prism finds no violation.

let service: Service;
let wallet: TestWallet;
let origin: string;
let dev: { buyer: { private_key: `0x${string}` }; chain: { rpc_url: string } };
before(async () => {
  // As docs/api.md tells a developer who tries webhooks on this machine (its example is checked below).
  service = await startService({ WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1' });
  dev = await devFile(service.dataDir);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  origin = new URL(service.baseUrl).origin;
});
after(() => service?.stop());

let counter = 0;
const newKey = () => `clients-${process.pid}-${counter++}`;
const order = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Clients FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};

/** The buyer's USDC balance and the asset of this service's 402 (read from a live 402). */
async function buyerBalance(): Promise<bigint> {
  const answer = await request(service, 'POST', '/orders', { body: order, headers: { 'idempotency-key': newKey() } });
  const asset = decodePaymentRequiredHeader(answer.headers.get('payment-required')!).accepts[0].asset;
  return wallet.balanceOf(asset, wallet.address);
}

/** The products a client can quote, with the parameters each requires (at their minimum) and a billing it must name. */
async function quotableRequests(): Promise<Record<string, unknown>[]> {
  const products = (await request(service, 'GET', '/products', { auth: false })).body.products as any[];
  return products
    .filter((p) => p.pricing_status === 'approved' && (p.status === 'ready' || p.status === 'available'))
    .map((p) => {
      const parameters = Object.fromEntries(
        Object.entries(p.parameters as Record<string, any>)
          .filter(([, d]) => d.required)
          .map(([name, d]) => [name, d.minimum ?? (d.type === 'boolean' ? false : 1)]),
      );
      return {
        product_id: p.id,
        ...(Object.keys(parameters).length && { parameters }),
        ...(p.billing_type === 'subscription' && { billing: 'monthly' }),
      };
    });
}

const V1_SCRIPT = `
import axios from 'axios';
import { createSigner as fetchSigner, wrapFetchWithPayment } from 'x402-fetch';
import { createSigner as axiosSigner, withPaymentInterceptor } from 'x402-axios';
const { ORDER_URL, API_KEY, PRIVATE_KEY, ORDER_BODY } = process.env;
const failure = (e) => ({ name: e?.name, typeError: e instanceof TypeError, message: String(e?.message ?? e) });
const results = {};
const headers = (key) => ({ authorization: 'Bearer ' + API_KEY, 'content-type': 'application/json', 'idempotency-key': key });
try {
  const pay = wrapFetchWithPayment(fetch, await fetchSigner('base', PRIVATE_KEY));
  const response = await pay(ORDER_URL, { method: 'POST', headers: headers('v1-fetch-' + process.pid), body: ORDER_BODY });
  results.fetch = { status: response.status, body: await response.text() };
} catch (e) { results.fetch = { error: failure(e) }; }
try {
  const client = withPaymentInterceptor(axios.create(), await axiosSigner('base', PRIVATE_KEY));
  const response = await client.post(ORDER_URL, JSON.parse(ORDER_BODY), { headers: headers('v1-axios-' + process.pid) });
  results.axios = { status: response.status, body: response.data };
} catch (e) { results.axios = { error: failure(e) }; }
console.log(JSON.stringify(results));
`;

// The groups below run side by side: each waits mostly on programs of its own (npm clients, a compiler, Prism), and
// only the x402 clients pay, one after the other within their group, so a balance one of them reads moves only by what
// it paid.
describe('clients', { concurrency: true }, () => {
  describe('x402 clients', { concurrency: false }, () => {
    test('x402 v1 clients (x402-fetch 1.2, x402-axios 0.7) fail on the v2 terms with a readable reason and pay nothing', async () => {
      const dir = await npmScratch('x402-v1', ['x402-fetch@1.2', 'x402-axios@0.7', 'axios@1']);
      await writeFile(join(dir, 'v1-clients.mjs'), V1_SCRIPT);
      const before = await buyerBalance();
      const ran = await run(process.execPath, ['v1-clients.mjs'], dir, 120_000, {
        ORDER_URL: `${service.baseUrl}/orders`,
        API_KEY: service.apiKey,
        PRIVATE_KEY: dev.buyer.private_key,
        ORDER_BODY: JSON.stringify(order),
      });
      assert.equal(ran.code, 0, ran.stderr);
      const results = JSON.parse(ran.stdout.trim().split('\n').at(-1)!);
      for (const client of ['fetch', 'axios']) {
        const { error } = results[client];
        assert.ok(error, `${client}: ${JSON.stringify(results[client]).slice(0, 300)}`);
        assert.equal(error.typeError, false, `${client} crashed: ${error.message}`);
        // The v1 client's own validation names what it cannot use: a v2 (CAIP-2) network in accepts.
        assert.match(error.message, /"network"/, `${client}: ${error.message}`);
        assert.match(error.message, /received 'eip155:8453'/, `${client}: ${error.message}`);
      }
      assert.equal(await buyerBalance(), before, 'nothing was charged');
    });

    test('a 402 body keeps the error document and repeats x402Version and accepts of PAYMENT-REQUIRED', async () => {
      const answer = await request(service, 'POST', '/orders', {
        body: order,
        headers: { 'idempotency-key': newKey() },
      });
      assert.equal(answer.status, 402);
      assert.equal(answer.body.ok, false);
      assert.equal(answer.body.error.code, 'payment_required');
      assert.equal(typeof answer.body.error.message, 'string');
      assert.equal(answer.body.error.retryable, false);
      assert.match(answer.body.error.request_id, /^req_/);
      const header = decodePaymentRequiredHeader(answer.headers.get('payment-required')!);
      assert.equal(answer.body.x402Version, 2);
      assert.deepEqual(answer.body.accepts, header.accepts);
    });

    test('the x402 v2 client (@x402/fetch) still pays, and is charged the amount of the 402', async () => {
      const key = newKey();
      const required = await request(service, 'POST', '/orders', { body: order, headers: { 'idempotency-key': key } });
      const amount = BigInt(decodePaymentRequiredHeader(required.headers.get('payment-required')!).accepts[0].amount);
      const before = await buyerBalance();
      const response = await wallet.payingFetch()(`${service.baseUrl}/orders`, {
        method: 'POST',
        body: JSON.stringify(order),
        headers: {
          authorization: `Bearer ${service.apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
      });
      const body = (await response.json()) as any;
      assert.equal(response.status, 200, JSON.stringify(body));
      assert.equal(body.order.status, 'active');
      assert.equal(await buyerBalance(), before - amount);
    });
  });

  describe('agentcash discovery', { concurrency: true }, () => {
    let bin: string;
    let home: string;
    before(async () => {
      const dir = await npmScratch('agentcash', ['agentcash@0.14.4', 'ethers@6'], ['--legacy-peer-deps']);
      bin = join(dir, 'node_modules/.bin/agentcash');
      home = await scratchDir('agentcash-home-'); // it keeps a wallet and logs in HOME
    });
    const agentcash = async (...args: string[]) => {
      const ran = await run(bin, args, home, 120_000, { HOME: home });
      assert.equal(ran.code, 0, ran.stdout + ran.stderr);
      return JSON.parse(ran.stdout) as any;
    };

    test('agentcash discover finds the paid endpoints, their auth and price range', async () => {
      const found = await agentcash('discover', origin);
      assert.equal(found.data.found, true, JSON.stringify(found));
      const byRoute = new Map((found.data.endpoints as any[]).map((e) => [`${e.method} ${e.path}`, e]));
      const orders = byRoute.get('POST /api/v1/orders');
      assert.ok(orders, JSON.stringify([...byRoute.keys()]));
      assert.match(orders.authMode, /paid/);
      assert.ok(byRoute.get('POST /api/v1/services/{service_id}/upgrade'));
      assert.ok(byRoute.get('POST /api/v1/quotes'));
    });

    test('agentcash check reads the order operation: paid with x402, its price range and request schema', async () => {
      const checked = await agentcash('check', `${service.baseUrl}/orders`);
      const post = (checked.data.results as any[]).find((r) => r.method === 'POST');
      assert.ok(post, JSON.stringify(checked));
      assert.equal(post.source, 'openapi');
      assert.equal(post.authMode, 'paid');
      assert.deepEqual(post.protocols, ['x402']);
      assert.equal(post.estimatedPrice, '0.27-16.15 USD');
      assert.deepEqual(post.inputSchema.requestBody.required, ['product_id', 'email', 'station_name']);
    });

    test("/.well-known/x402 lists the paid resources in the origin-level shape, beside the draft's items", async () => {
      const manifest = (await (await fetch(`${origin}/.well-known/x402`)).json()) as any;
      assert.deepEqual(manifest.resources, [
        `${service.baseUrl}/orders`,
        `${service.baseUrl}/services/:service_id/upgrade`,
        `${service.baseUrl}/services/:service_id/extend`,
      ]);
      assert.equal(manifest.version, 1);
      assert.match(manifest.instructions, /Authorization: Bearer/);
      assert.deepEqual(
        manifest.items.map((i: any) => i.resource.url),
        manifest.resources,
      );
      const site = (await (await fetch(`${origin}/openapi.json`)).json()) as any;
      const api = (await (await fetch(`${service.baseUrl}/openapi.json`)).json()) as any;
      assert.deepEqual(
        Object.keys(site.paths).sort(),
        Object.keys(api.paths)
          .map((p) => (p.startsWith('/.well-known') ? p : `/api/v1${p}`))
          .sort(),
      );
    });
  });

  describe('typed clients from /openapi.json', { concurrency: true }, () => {
    test('openapi-typescript types a client that quotes every product with its required parameters, and refuses a wrong type', async () => {
      const dir = await scratchDir('typed-client-');
      await writeFile(
        join(dir, 'openapi.json'),
        Buffer.from(await (await fetch(`${service.baseUrl}/openapi.json`)).arrayBuffer()),
      );
      const generated = await run(
        process.execPath,
        [join(root, 'node_modules/openapi-typescript/bin/cli.js'), 'openapi.json', '-o', 'api.d.ts'],
        dir,
      );
      assert.equal(generated.code, 0, generated.stderr);

      const requests = await quotableRequests();
      assert.ok(
        requests.some((r) => r.product_id === 'radio-directo'),
        'subscriptions are quotable',
      );
      const quote = await request(service, 'POST', '/quotes', {
        body: requests.find((r) => r.product_id === 'instant-stream'),
      });
      assert.equal(quote.status, 200, JSON.stringify(quote.body));
      await writeFile(
        join(dir, 'client.ts'),
        [
          "import type { components } from './api.js';",
          "type QuoteRequest = components['schemas']['QuoteRequest'];",
          "type QuoteResponse = components['schemas']['QuoteResponse'];",
          `export const requests: QuoteRequest[] = ${JSON.stringify(requests, null, 2)};`,
          // A real answer, as the client receives it: product, configuration and breakdown are typed as what they hold.
          `export const answer: QuoteResponse = ${JSON.stringify(quote.body, null, 2)};`,
          'export const minutes: unknown = answer.quote.configuration.duration_hours;',
          '',
        ].join('\n'),
      );
      await writeFile(
        join(dir, 'wrong.ts'),
        [
          "import type { components } from './api.js';",
          "export const wrong: components['schemas']['QuoteRequest'] = { product_id: 'instant-stream', parameters: { duration_hours: '1', max_listeners: 2, bitrate_kbps: 64 } };",
          '',
        ].join('\n'),
      );
      // One compiler run for both files (a run is seconds of CPU): client.ts must have no error, wrong.ts its one.
      const checked = await run(
        process.execPath,
        [
          join(root, 'node_modules/typescript/bin/tsc'),
          ...['--noEmit', '--strict', '--target', 'es2022', '--lib', 'es2022', '--module', 'nodenext'],
          'client.ts',
          'wrong.ts',
        ],
        dir,
      );
      const errors = checked.stdout.split('\n').filter((line) => /error TS\d+/.test(line));
      const client = await readFile(join(dir, 'client.ts'), 'utf8');
      assert.deepEqual(
        errors.filter((line) => !line.startsWith('wrong.ts')),
        [],
        `${checked.stdout}\n${client}`,
      );
      assert.notEqual(checked.code, 0, 'a string where the schema says number does not compile');
      assert.match(checked.stdout, /wrong\.ts.*error TS2322/s);
      assert.match(checked.stdout, /Type 'string' is not assignable to type 'number'/);
    });

    test('Prism, as a validating proxy in front of the service, finds no violation in real requests and answers', async () => {
      const dir = await npmScratch('prism', ['@stoplight/prism-cli@5']);
      const documentFile = join(await scratchDir('prism-doc-'), 'openapi.json');
      await writeFile(documentFile, Buffer.from(await (await fetch(`${origin}/openapi.json`)).arrayBuffer()));
      const port = await freePort();
      const { spawn } = await import('node:child_process');
      const prism = spawn(
        join(dir, 'node_modules/.bin/prism'),
        ['proxy', documentFile, origin, '--errors', '--port', String(port), '-h', '127.0.0.1'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let log = '';
      prism.stdout.on('data', (d) => {
        log += d;
      });
      prism.stderr.on('data', (d) => {
        log += d;
      });
      try {
        const deadline = Date.now() + 120_000; // it starts beside the other groups of clients
        while (!/Prism is listening/.test(log)) {
          assert.ok(Date.now() < deadline && prism.exitCode === null, `prism did not start:\n${log.slice(-2000)}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const proxied = { baseUrl: `http://127.0.0.1:${port}/api/v1`, apiKey: service.apiKey };
        const expect = async (
          method: string,
          path: string,
          status: number,
          init: Parameters<typeof request>[3] = {},
        ) => {
          const answer = await request(proxied, method, path, init);
          assert.equal(answer.status, status, `${method} ${path}: ${JSON.stringify(answer.body).slice(0, 800)}`);
          assert.match(
            answer.headers.get('x-request-id') ?? '',
            /^req_/,
            `${method} ${path} was answered by the service, not Prism`,
          );
          assert.equal(
            answer.headers.get('sl-violations'),
            null,
            `${method} ${path}: ${answer.headers.get('sl-violations')}`,
          );
          return answer;
        };
        for (const body of await quotableRequests()) await expect('POST', '/quotes', 200, { body });
        const radio = await expect('POST', '/quotes', 200, {
          body: { product_id: 'radio-directo', billing: 'annual' },
        });
        assert.equal(radio.body.quote.agent_orderable, false);
        await expect('POST', '/orders', 402, { body: order, headers: { 'idempotency-key': newKey() } });
        await expect('POST', '/orders', 402, {
          body: {
            product_id: 'radio-directo',
            billing: 'monthly',
            email: 'agent@example.com',
            station_name: 'Directo FM',
          },
          headers: { 'idempotency-key': newKey() },
        });
        const signIn = await expect('GET', '/services', 402, { auth: false });
        assert.equal(signIn.body.error.code, 'authentication_required');
        await expect('GET', '/products/no-such-product', 404, { auth: false });
        await expect('GET', '/orders/ra_nosuchorder1', 404);
        await expect('POST', '/quotes', 401, {
          body: { product_id: 'instant-stream', parameters: order.parameters },
          headers: { authorization: 'Bearer not-a-key' },
        });
        const unknownQuote = await expect('POST', '/orders', 422, {
          body: { ...order, metadata: { quote_id: 'qt_nosuchquote1234' } },
          headers: { 'idempotency-key': newKey() },
        });
        assert.equal(unknownQuote.body.error.code, 'quote_not_found');
        assert.doesNotMatch(log, /violation/i);
      } finally {
        prism.kill();
        if (prism.exitCode === null) await once(prism, 'exit');
      }
    });
  });

  describe('docs/api.md', () => {
    test('the webhook example is accepted by the service as docs/api.md tells to run it', async () => {
      const doc = await readFile(join(root, 'docs', 'api.md'), 'utf8');
      const example = /curl -s -X POST \$B\/webhooks[^\n]*\\\n\s*-d '([^']+)'/.exec(doc);
      assert.ok(example, 'docs/api.md has the webhook registration example');
      const registered = await request(service, 'POST', '/webhooks', { body: JSON.parse(example[1]) });
      assert.equal(registered.status, 201, JSON.stringify(registered.body));
      assert.match(registered.body.secret, /\S{16,}/);
      assert.match(
        doc,
        /WEBHOOK_ALLOW_INSECURE_LOOPBACK=1 npm start/,
        'docs/api.md says how to run the service for this example',
      );
    });
  });
});

/** A loopback port nobody listens on now. */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}
