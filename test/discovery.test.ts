import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { validateDiscoveryExtension } from '@x402/extensions/bazaar';
import {
  appendPaymentIdentifierToExtensions,
  generatePaymentId,
  PAYMENT_IDENTIFIER,
} from '@x402/extensions/payment-identifier';
import { encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import { request, startService, type JsonResponse, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { buyerWallet } from './support/dev-file.js';

// What an agent with only the base URL finds: CORS for browser agents, the x402 extensions on every 402
// (payment-identifier, bazaar), /.well-known/x402, and a public /health without operator details.

let service: Service;
let wallet: TestWallet;
let origin: string;
before(async () => {
  service = await startService();
  wallet = await buyerWallet(service);
  origin = new URL(service.baseUrl).origin;
});
after(() => service?.stop());

const body = (hours: number, extra: Record<string, unknown> = {}) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Discovery FM',
  parameters: { duration_hours: hours, max_listeners: 2, bitrate_kbps: 64 },
  ...extra,
});
/** A valid order of a product from its GET /products document: an orderable billing, required parameters at their default or minimum. */
function orderFor(product: any) {
  const billing = product.billing_options.find((o: any) => o.agent_orderable).billing;
  const parameters = Object.fromEntries(
    Object.entries(product.parameters as Record<string, any>)
      .filter(([, d]) => d.required || d.default !== undefined)
      .map(([name, d]) => [name, d.default ?? d.minimum ?? (d.type === 'boolean' ? false : 1)]),
  );
  return { product_id: product.id, billing, email: 'agent@example.com', station_name: 'Every Product FM', parameters };
}
let counter = 0;
const newKey = () => `discovery-${process.pid}-${counter++}`;
/** A schema without its annotations (default, description): what it accepts. */
const shapeOf = (schema: unknown) =>
  JSON.parse(JSON.stringify(schema, (key, value) => (key === 'default' || key === 'description' ? undefined : value)));

const ask = (path: string, payload: unknown, key = newKey()) =>
  request(service, 'POST', path, { body: payload, headers: { 'idempotency-key': key } });

/** A payment for this 402, signed by the official client, carrying this payment-identifier (or none). */
async function paymentFor(required: PaymentRequired, paymentId?: string): Promise<string> {
  const copy: PaymentRequired = structuredClone(required);
  if (paymentId) appendPaymentIdentifierToExtensions(copy.extensions!, paymentId);
  return encodePaymentSignatureHeader(await wallet.client.createPaymentPayload(copy));
}

const pay = (path: string, payload: unknown, key: string, signature: string) =>
  request(service, 'POST', path, {
    body: payload,
    headers: { 'idempotency-key': key, 'payment-signature': signature },
  });

function assertError(response: JsonResponse, status: number, code: string) {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.equal(response.body.error.code, code, JSON.stringify(response.body));
}

describe('CORS for browser agents', () => {
  test('preflights of public and authenticated routes are answered with the headers an agent sends', async () => {
    for (const path of [
      '/api/v1/products',
      '/api/v1/orders',
      '/api/v1/services/abcdefgh12/upgrade',
      '/.well-known/x402',
    ]) {
      const response = await fetch(`${origin}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://agent.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers':
            'authorization, content-type, idempotency-key, payment-signature, sign-in-with-x',
        },
      });
      assert.equal(response.status, 204, path);
      assert.equal(response.headers.get('access-control-allow-origin'), '*', path);
      assert.match(response.headers.get('access-control-allow-methods') ?? '', /POST/);
      const allowed = (response.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/,\s*/);
      for (const header of ['authorization', 'content-type', 'idempotency-key', 'payment-signature', 'sign-in-with-x'])
        assert.ok(allowed.includes(header), `${path}: ${header}`);
    }
  });

  test('every answer, a 402 and an error included, exposes PAYMENT-REQUIRED, PAYMENT-RESPONSE and X-Request-Id', async () => {
    const answers = [
      await fetch(`${service.baseUrl}/products`, { headers: { origin: 'https://agent.example' } }),
      await fetch(`${service.baseUrl}/orders`, {
        method: 'POST',
        headers: {
          origin: 'https://agent.example',
          authorization: `Bearer ${service.apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': newKey(),
        },
        body: JSON.stringify(body(1)),
      }),
      await fetch(`${service.baseUrl}/no-such-route`, { headers: { origin: 'https://agent.example' } }),
      await fetch(`${service.baseUrl}/quotes`, { method: 'POST', headers: { origin: 'https://agent.example' } }),
      // The MCP transport writes its own answer (a browser page of this service's own origin: others are refused,
      // DNS rebinding protection, unless MCP_ALLOWED_ORIGINS names them).
      await fetch(`${service.baseUrl}/mcp`, {
        method: 'POST',
        headers: {
          origin,
          authorization: `Bearer ${service.apiKey}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'cors-test', version: '1' } },
        }),
      }),
    ];
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 402, 404, 401, 200],
    );
    for (const answer of answers) {
      assert.equal(answer.headers.get('access-control-allow-origin'), '*');
      const exposed = (answer.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/,\s*/);
      for (const header of ['payment-required', 'payment-response', 'x-request-id'])
        assert.ok(exposed.includes(header), `${answer.status}: ${header} in ${exposed}`);
    }
  });
});

describe('catalog documents at their exact paths', () => {
  // GET and HEAD of /products, /pricing and /availability are answered without Koa once built; other spellings, and the
  // first request (which builds them), go through the router.
  const requests = async (route: string) => {
    const scrape = await (await fetch(service.metricsUrl)).text();
    const line = new RegExp(
      `^http_requests_total\\{route="${route.replaceAll('/', '\\/')}",method="GET",status="200"\\} (\\d+)$`,
      'm',
    );
    return Number(line.exec(scrape)?.[1] ?? 0);
  };
  const comparable = (response: Response) => {
    const headers = Object.fromEntries(
      [...response.headers].filter(([name]) => !['date', 'x-request-id'].includes(name)),
    );
    return { status: response.status, headers };
  };

  for (const path of ['/products', '/pricing', '/availability']) {
    test(`GET ${path} answers as the router does, with a request id, CORS and its metrics route`, async () => {
      const route = `/api/v1${path}`;
      await (await fetch(`${service.baseUrl}${path}`)).arrayBuffer();
      const before = await requests(route);
      const direct = await fetch(`${service.baseUrl}${path}`, { headers: { 'X-Request-Id': 'by-path-1' } });
      const routed = await fetch(`${service.baseUrl}${path}/`); // strict: false, so the router answers the trailing slash
      assert.equal(direct.headers.get('x-request-id'), 'by-path-1');
      assert.match(routed.headers.get('x-request-id') ?? '', /^req_/);
      assert.deepEqual(comparable(direct), comparable(routed));
      assert.equal(direct.headers.get('access-control-allow-origin'), '*');
      assert.deepEqual(Buffer.from(await direct.arrayBuffer()), Buffer.from(await routed.arrayBuffer()));
      assert.equal(await requests(route), before + 2);

      const head = await fetch(`${service.baseUrl}${path}`, { method: 'HEAD' });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-length'), direct.headers.get('content-length'));
      assert.equal((await head.arrayBuffer()).byteLength, 0);

      const post = await fetch(`${service.baseUrl}${path}`, { method: 'POST' });
      assert.equal(post.status, 405);
      assert.equal(((await post.json()) as any).error.code, 'method_not_allowed');
    });
  }
});

describe('/health', () => {
  test('the public document keeps to what an agent needs; the operator reads the details on the metrics listener', async () => {
    const { status, body: health } = await request(service, 'GET', '/health', { auth: false });
    assert.equal(status, 200);
    assert.equal(health.status, 'ok');
    assert.equal(typeof health.version, 'string');
    assert.equal(health.machine_payment.configured, true);
    assert.match(health.catalog.content_hash, /^sha256:/);
    assert.equal(health.links.x402_discovery, '/.well-known/x402');
    for (const check of Object.values(health.checks) as Array<Record<string, unknown>>)
      assert.deepEqual(Object.keys(check), ['ok']);
    const text = JSON.stringify(health);
    assert.ok(
      !/latency|icecast_url|"url"|127\.0\.0\.1|:\/\//.test(text.replace(/"links":\{[^}]*\}/, '')),
      `no addresses or latencies: ${text}`,
    );

    const details = (await (await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as any;
    assert.equal(details.checks.database.ok, true);
    assert.equal(typeof details.checks.database.latency_ms, 'number');
    assert.match(details.checks.chain.block, /^\d+$/);
    assert.equal(typeof details.catalog.disk_content_hash, 'string');
    if (details.checks.icecast.ok) assert.match(details.checks.icecast.url, /^http:\/\//);
  });
});

describe('x402 extensions on the 402', () => {
  test('bazaar: the 402 of POST /orders declares its real input and output schemas, service name and tags', async () => {
    const response = await ask('/orders', body(1));
    assertError(response, 402, 'payment_required');
    const required = decodePaymentRequiredHeader(response.headers.get('payment-required')!);
    assert.equal(required.resource.serviceName, 'Agent Audio API');
    assert.ok(required.resource.tags!.includes('audio'));
    const bazaar = required.extensions!.bazaar as any;
    const validation = validateDiscoveryExtension(bazaar);
    assert.equal(validation.valid, true, JSON.stringify(validation.errors));
    assert.equal(bazaar.info.input.method, 'POST');
    assert.equal(bazaar.info.input.bodyType, 'json');
    const schema = bazaar.schema.properties.input.properties.body;
    assert.deepEqual(
      schema.required,
      ['product_id', 'email', 'station_name'],
      'the order request schema the server validates with',
    );
    assert.deepEqual(schema.properties.product_id.enum, ['instant-stream'], 'the ordered product only');
    assert.ok(!schema.properties.billing.enum.includes('annual'), 'no billing that can never be ordered');
    assert.equal(bazaar.info.input.body.product_id, 'instant-stream');
    assert.deepEqual(
      schema.properties.parameters.required,
      ['duration_hours', 'max_listeners', 'bitrate_kbps'],
      "the catalog's parameter schema",
    );
    assert.deepEqual(bazaar.schema.properties.output.properties.example.required, [
      'ok',
      'order',
      'service',
      'idempotent_replay',
    ]);
    assert.deepEqual(required.extensions![PAYMENT_IDENTIFIER], {
      info: { required: false },
      schema: (required.extensions![PAYMENT_IDENTIFIER] as any).schema,
    });
  });

  test("a 402 declares the ordered product's parameters and no other product's, and PAYMENT-REQUIRED stays under 8 KiB for every product", async () => {
    const products = (await request(service, 'GET', '/products', { auth: false })).body.products as any[];
    // audio-storage-api is bought per service (POST /services/{id}/recordings/retention), never with POST /orders.
    const orderable = products.filter((p) => p.orderable.agent && p.id !== 'audio-storage-api');
    assert.ok(orderable.length >= 3, JSON.stringify(products.map((p) => p.id)));
    const schemas = (await request(service, 'GET', '/openapi.json', { auth: false })).body.components.schemas;
    for (const product of orderable) {
      const response = await ask('/orders', orderFor(product));
      assertError(response, 402, 'payment_required');
      const header = response.headers.get('payment-required')!;
      assert.ok(header.length < 8192, `${product.id}: PAYMENT-REQUIRED is ${header.length} bytes`);
      const bazaar = decodePaymentRequiredHeader(header).extensions!.bazaar as any;
      assert.equal(
        validateDiscoveryExtension(bazaar).valid,
        true,
        JSON.stringify(validateDiscoveryExtension(bazaar).errors),
      );
      const schema = bazaar.schema.properties.input.properties.body;
      assert.deepEqual(schema.properties.product_id.enum, [product.id]);
      const published = schemas[`Parameters_${product.id.replace(/-/g, '_')}`];
      // /openapi.json states the defaults in the descriptions (generated typed clients would make them required).
      if (published)
        assert.deepEqual(
          shapeOf(schema.properties.parameters),
          shapeOf(published),
          `${product.id}: its Parameters_* schema of /openapi.json`,
        );
      else
        assert.deepEqual(
          Object.keys(schema.properties.parameters.properties),
          Object.keys(product.parameters),
          product.id,
        );
      assert.equal(bazaar.info.input.body.product_id, product.id);
      const text = JSON.stringify(bazaar);
      for (const other of orderable)
        if (other.id !== product.id)
          assert.ok(!text.includes(`"${other.id}"`), `${product.id}'s 402 names ${other.id}`);
    }
  });

  test("the 402 says how to raise the official client's $1 cap when the amount exceeds it", async () => {
    const cheap = await ask('/orders', body(1));
    assert.ok(
      BigInt(decodePaymentRequiredHeader(cheap.headers.get('payment-required')!).accepts[0].amount) <= 1_000_000n,
    );
    assert.doesNotMatch(cheap.body.error.message, /maxAmountPerPayment/);
    const dear = await ask('/orders', body(48));
    const amount = BigInt(decodePaymentRequiredHeader(dear.headers.get('payment-required')!).accepts[0].amount);
    assert.ok(amount > 1_000_000n, String(amount));
    assert.match(
      dear.body.error.message,
      /above 1 USDC by default \(maxAmountPerPayment\).*setSpendControls\(\{ maxAmountPerPayment: '\$1\.21' \}\)/,
    );
  });

  test('payment-identifier: the same id and payload give the same order under any Idempotency-Key; another payload under it is refused', async () => {
    const order = body(2);
    const first = await ask('/orders', order);
    const required = decodePaymentRequiredHeader(first.headers.get('payment-required')!);
    const paymentId = generatePaymentId('pay_');
    const signature = await paymentFor(required, paymentId);
    const key = newKey();
    const paid = await pay('/orders', order, key, signature);
    assert.equal(paid.status, 200, JSON.stringify(paid.body));

    // The response was lost, and the agent retries with its payment id but a fresh Idempotency-Key.
    const resent = await pay('/orders', order, newKey(), signature);
    assert.equal(resent.status, 200, JSON.stringify(resent.body));
    assert.equal(resent.body.order.id, paid.body.order.id);
    assert.equal(resent.body.idempotent_replay, true);

    // The same id with another payment (a new authorization) is refused before anything is charged.
    const otherPayment = await paymentFor(required, paymentId);
    assertError(await pay('/orders', order, newKey(), otherPayment), 409, 'payment_id_conflict');
    // ... and so is the same id and payload for another request body.
    assertError(
      await pay('/orders', body(2, { station_name: 'Other FM' }), newKey(), signature),
      409,
      'payment_id_conflict',
    );

    // An id that breaks the extension's rules is refused with what to do.
    const badId = JSON.parse(Buffer.from(await paymentFor(required, generatePaymentId('pay_')), 'base64').toString());
    badId.extensions[PAYMENT_IDENTIFIER].info.id = 'short';
    assertError(
      await pay('/orders', order, newKey(), Buffer.from(JSON.stringify(badId)).toString('base64')),
      400,
      'payment_id_invalid',
    );

    // A schema of the client's own is never compiled or run (a catastrophic pattern froze the service): refused.
    const ownSchema = JSON.parse(Buffer.from(await paymentFor(required, 'a'.repeat(30)), 'base64').toString());
    ownSchema.extensions[PAYMENT_IDENTIFIER].schema = {
      type: 'object',
      properties: { id: { type: 'string', pattern: '^(a+)+b$' } },
    };
    const refused = await pay('/orders', order, newKey(), Buffer.from(JSON.stringify(ownSchema)).toString('base64'));
    assertError(refused, 400, 'payment_id_invalid');
    assert.match(refused.body.error.message, /schema is not the one this service declares/);

    // The id is scoped to the API key, like an Idempotency-Key: another agent's same id is its own purchase.
    const created = await service.cli(['keys', 'create', '--name', 'second agent']);
    const otherKey = JSON.parse(created.stdout).api_key as string;
    const other = { baseUrl: service.baseUrl, apiKey: otherKey };
    const otherAsk = await request(other, 'POST', '/orders', {
      body: order,
      headers: { 'idempotency-key': 'other-1' },
    });
    assert.equal(otherAsk.status, 402, JSON.stringify(otherAsk.body) + created.stdout);
    const otherPaid = await request(other, 'POST', '/orders', {
      body: order,
      headers: {
        'idempotency-key': 'other-1',
        'payment-signature': await paymentFor(
          decodePaymentRequiredHeader(otherAsk.headers.get('payment-required')!),
          paymentId,
        ),
      },
    });
    assert.equal(otherPaid.status, 200, JSON.stringify(otherPaid.body));
    assert.notEqual(otherPaid.body.order.id, paid.body.order.id);

    // bazaar on the other paid operation: the upgrade of the service just bought.
    const upgrade = await ask(`/services/${paid.body.service.service_id}/upgrade`, { product_id: 'event-stream' });
    assertError(upgrade, 402, 'payment_required');
    const upgradeRequired = decodePaymentRequiredHeader(upgrade.headers.get('payment-required')!);
    const bazaar = upgradeRequired.extensions!.bazaar as any;
    assert.equal(
      validateDiscoveryExtension(bazaar).valid,
      true,
      JSON.stringify(validateDiscoveryExtension(bazaar).errors),
    );
    assert.equal(bazaar.routeTemplate, '/api/v1/services/:service_id/upgrade');
    assert.deepEqual(
      bazaar.schema.properties.input.properties.body.properties.product_id.enum,
      ['event-stream'],
      'the product upgraded to only',
    );
    assert.ok(upgradeRequired.extensions![PAYMENT_IDENTIFIER]);
  });
});

describe('/.well-known/x402', () => {
  test('lists the paid operations with their network, asset, receiver and price range, matching the live 402', async () => {
    const response = await fetch(`${origin}/.well-known/x402`);
    assert.equal(response.status, 200);
    const manifest = (await response.json()) as any;
    assert.equal(manifest.x402Version, 2);
    const live = decodePaymentRequiredHeader((await ask('/orders', body(1))).headers.get('payment-required')!)
      .accepts[0];
    const orders = manifest.items.find((i: any) => i.resource.url === `${service.baseUrl}/orders`);
    assert.ok(orders, JSON.stringify(manifest.items.map((i: any) => i.resource.url)));
    assert.equal(orders.type, 'http');
    assert.equal(orders.input.method, 'POST');
    assert.deepEqual({ ...orders.accepts[0], amount: live.amount }, { ...live, extra: orders.accepts[0].extra });
    assert.deepEqual([orders.priceRange.minimum, orders.priceRange.maximum], ['0.27', '16.15']);
    assert.ok(manifest.items.some((i: any) => i.input.routeTemplate === '/api/v1/services/:service_id/upgrade'));
    assert.deepEqual(await (await fetch(`${origin}/.well-known/x402.json`)).json(), manifest);
  });
});

describe('prices in another currency, and billings that cannot be ordered', () => {
  test('a subscription priced in EUR is quoted in USDC with the rate and its source, the same amount as its 402, and replays', async () => {
    const quoted = await request(service, 'POST', '/quotes', {
      body: { product_id: 'radio-directo', billing: 'monthly' },
    });
    assert.equal(quoted.status, 200, JSON.stringify(quoted.body));
    const quote = quoted.body.quote;
    assert.equal(quote.billing, 'monthly');
    assert.deepEqual(quote.price, { amount: '7.452', amount_atomic: '7452000', currency: 'USDC', decimals: 6 });
    assert.deepEqual(
      quote.breakdown.map((l: any) => [l.unit, l.quantity, l.exchange_rate?.pair, l.exchange_rate?.rate]),
      [['EUR', '6.9', 'EUR_USDC', '1.08']],
    );
    assert.match(quote.breakdown[0].exchange_rate.source, /exchange_rates\.EUR_USDC/);
    assert.equal(quote.agent_orderable, true);

    const ordered = await ask('/orders', {
      product_id: 'radio-directo',
      billing: 'monthly',
      email: 'agent@example.com',
      station_name: 'Directo FM',
    });
    assertError(ordered, 402, 'payment_required');
    assert.equal(
      decodePaymentRequiredHeader(ordered.headers.get('payment-required')!).accepts[0].amount,
      quote.price.amount_atomic,
      'the quote and the 402 agree',
    );

    const replay = await service.cli(['audit', 'replay', quote.audit.evaluation_id]);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    assert.equal(JSON.parse(replay.stdout.split('\n')[0]).identical, true);

    const unbilled = await request(service, 'POST', '/quotes', { body: { product_id: 'radio-directo' } });
    assertError(unbilled, 422, 'product_not_quotable');
    assert.match(unbilled.body.error.message, /billing monthly or annual/);
  });

  test('annual, above the order maximum, is quoted as not orderable and is not offered by discovery, which says why', async () => {
    const annual = await request(service, 'POST', '/quotes', {
      body: { product_id: 'radio-directo', billing: 'annual' },
    });
    assert.equal(annual.status, 200, JSON.stringify(annual.body));
    assert.equal(annual.body.quote.price.amount, '74.52');
    assert.equal(annual.body.quote.agent_orderable, false);
    assert.deepEqual(
      annual.body.quote.agent_orderable_reasons.map((r: any) => r.code),
      ['amount_out_of_range'],
    );

    const product = (await request(service, 'GET', '/products/radio-directo', { auth: false })).body.product;
    const options = Object.fromEntries(product.billing_options.map((o: any) => [o.billing, o]));
    assert.deepEqual(Object.keys(options).sort(), ['annual', 'monthly']);
    assert.equal(options.monthly.agent_orderable, true);
    assert.equal(options.monthly.price.amount_atomic, '7452000');
    assert.equal(options.annual.agent_orderable, false);
    assert.match(options.annual.reason, /74\.52 USDC, outside the agent order limits \(0\.27 to 16\.15/);
    const pricing = (await request(service, 'GET', '/pricing', { auth: false })).body.prices.find(
      (p: any) => p.product_id === 'radio-directo',
    );
    assert.deepEqual(pricing.billing_options, product.billing_options);
    const availability = (await request(service, 'GET', '/availability', { auth: false })).body.products.find(
      (p: any) => p.product_id === 'radio-directo',
    );
    assert.deepEqual(availability.billing_options, product.billing_options);

    const billing = (await request(service, 'GET', '/openapi.json', { auth: false })).body.components.schemas
      .OrderRequest.properties.billing;
    assert.ok(billing.enum.includes('monthly') && billing.enum.includes('one_time'));
    assert.ok(!billing.enum.includes('annual'), JSON.stringify(billing));
    assert.match(billing.description, /annual \(radio-directo: Costs 74\.52 USDC/);
  });
});
