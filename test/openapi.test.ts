import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { refundRequestTypedData } from '../src/refunds/index.js';
import { buy, payFor } from './support/purchase.js';
import { root, scratchDir, startService, type Service } from './support/service.js';
import { challengeOf, signedHeader } from './support/siwx.js';
import { startFfmpegSource, waitFor } from './support/streaming.js';
import { mp3, sine, stillImage } from './support/tones.js';
import { TestWallet } from './support/wallet.js';
import { devFile, buyerWallet } from './support/dev-file.js';
import { connectDatabase } from './support/serve-lock.js';

// /openapi.json describes what the service really answers: every real answer of every operation (status and body)
// validates against the response the document states for it, and Redocly's recommended rules find no error.

let service: Service;
let wallet: TestWallet;
let origin: string;
let document: any;
let validators: (schema: unknown) => (value: unknown) => string | undefined;
before(async () => {
  service = await startService({ WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1' });
  wallet = await buyerWallet(service);
  origin = new URL(service.baseUrl).origin;
  document = await (await fetch(`${service.baseUrl}/openapi.json`)).json();
  // Not strict: OpenAPI's own keywords (example, discriminator) and type unions are part of the document.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const local = (value: unknown) =>
    JSON.parse(JSON.stringify(value).replaceAll('"#/components/schemas/', '"openapi#/$defs/'));
  ajv.addSchema({ $id: 'openapi', $defs: local(document.components.schemas) });
  validators = (schema) => {
    const validate = ajv.compile(local(schema));
    return (value) => (validate(value) ? undefined : ajv.errorsText(validate.errors));
  };
});
let source: ChildProcess | undefined;
after(() => {
  source?.kill('SIGKILL');
  return service?.stop();
});

const checked = new Set<string>();

/** Calls the API and checks the answer against the document's response for this operation and status. */
async function call(
  method: string,
  template: string,
  path: string,
  init: { body?: unknown; raw?: Buffer; headers?: Record<string, string>; auth?: boolean } = {},
) {
  const headers: Record<string, string> = {
    ...(init.auth !== false && { authorization: `Bearer ${service.apiKey}` }),
    ...init.headers,
  };
  if (init.body !== undefined) headers['content-type'] ??= 'application/json';
  const url = template.startsWith('/.well-known') ? `${origin}${path}` : `${service.baseUrl}${path}`;
  const response = await fetch(url, {
    method,
    headers,
    body: (init.raw ?? (init.body !== undefined ? JSON.stringify(init.body) : undefined)) as BodyInit | undefined,
  }).catch((e) => {
    throw new Error(`${method} ${url}: ${e.cause?.message ?? e.message}`);
  });
  const body = await response.json();
  return { status: response.status, headers: response.headers, body: check(method, template, response.status, body) };
}

/** Marks a recorded show finished, as the recorder does a minute after its source left. */
async function endShow(recordingId: string): Promise<void> {
  const pg = (await import('pg')).default;
  const client = await connectDatabase(service);
  try {
    await client.query('UPDATE recordings SET ended_at = now() WHERE id = $1', [recordingId]);
  } finally {
    await client.end();
  }
}

function check(method: string, template: string, status: number, body: unknown): any {
  const operation = document.paths[template]?.[method.toLowerCase()];
  assert.ok(operation, `${method} ${template} is in the document`);
  const response = operation.responses[String(status)];
  assert.ok(response, `${method} ${template} documents ${status}: ${JSON.stringify(body).slice(0, 300)}`);
  const schema = response.content?.['application/json']?.schema;
  assert.ok(schema, `${method} ${template} ${status} has a JSON schema`);
  const problem = validators(schema)(body);
  assert.equal(
    problem,
    undefined,
    `${method} ${template} ${status}: ${problem}\n${JSON.stringify(body).slice(0, 600)}`,
  );
  checked.add(`${method} ${template} ${status}`);
  return body;
}

/** The station profile (text and artwork) and the listener statistics of a service, answers and refusals. */
async function ownerProfileAndStats(serviceId: string) {
  const profile = `/services/${serviceId}/profile`;
  assert.equal((await call('GET', '/services/{service_id}/profile', profile)).status, 200);
  const put = await call('PUT', '/services/{service_id}/profile', profile, { body: { description: 'Documented.' } });
  assert.equal(put.body.profile.description, 'Documented.');
  assert.equal((await call('PUT', '/services/{service_id}/profile', profile, { body: { colour: 'red' } })).status, 422);
  const png = await stillImage('color=c=blue:s=32x32');
  const artwork = (raw: Buffer, type: string) =>
    call('PUT', '/services/{service_id}/profile/artwork', `${profile}/artwork`, {
      raw,
      headers: { 'content-type': type },
    });
  assert.equal((await artwork(png, 'image/png')).status, 200);
  assert.equal((await artwork(png, 'image/jpeg')).status, 415);
  assert.equal((await call('DELETE', '/services/{service_id}/profile/artwork', `${profile}/artwork`)).status, 200);
  const stats = `/services/${serviceId}/stats`;
  assert.equal((await call('GET', '/services/{service_id}/stats', `${stats}?group=day`)).status, 200);
  assert.equal((await call('GET', '/services/{service_id}/stats', `${stats}?from=2026-02-30`)).status, 400);
  const csv = await fetch(`${service.baseUrl}${stats}.csv`, { headers: { authorization: `Bearer ${service.apiKey}` } });
  assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
  assert.match(await csv.text(), /^date,dimension,key,/);
  checked.add(`GET /services/{service_id}/stats.csv ${csv.status}`);
  assert.equal((await call('GET', '/services/{service_id}/stats.csv', `${stats}.csv?group=week`)).status, 400);
}

const order = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'OpenAPI FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};

describe('/openapi.json', () => {
  test('every operation states its security (empty where public) and references the Parameters_* schemas', () => {
    for (const [path, item] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        if (method === 'servers') continue;
        if (path === '/orders' && method === 'post') {
          assert.equal(operation.security, undefined, 'spec 5.4: POST /orders has no security requirement of its own');
          assert.deepEqual(
            document.security,
            [{ agentApiKey: [] }],
            "so the document's default (the bearer key) applies",
          );
        } else {
          assert.ok(Array.isArray(operation.security), `${method} ${path} states security`);
        }
        for (const [status, response] of Object.entries<any>(operation.responses)) {
          if (Number(status) < 400) continue;
          const schema = response.content['application/json'].schema;
          // POST /mcp: the MCP transport answers some malformed messages with JSON-RPC errors (documented as such).
          if (path === '/mcp' && schema.$ref !== '#/components/schemas/Error') {
            const refs = (schema.oneOf ?? [schema]).map((s: any) => s.$ref);
            assert.ok(
              refs.includes('#/components/schemas/McpJsonRpcResponse') &&
                refs.every((r: string) =>
                  ['#/components/schemas/Error', '#/components/schemas/McpJsonRpcResponse'].includes(r),
                ),
              `${method} ${path} ${status}`,
            );
          } else if (status === '402') {
            // The error document with x402Version and accepts of PAYMENT-REQUIRED (x402 v1 clients read the body).
            assert.equal(schema.$ref, '#/components/schemas/PaymentRequired', `${method} ${path} ${status}`);
          } else {
            assert.equal(schema.$ref, '#/components/schemas/Error', `${method} ${path} ${status}`);
          }
        }
        // Where credentials are optional ({} among the requirements, POST /mcp) a refused key is not an HTTP 401 (a tool result says so).
        const optional = operation.security?.some((requirement: object) => Object.keys(requirement).length === 0);
        if ((operation.security?.length && !optional) || (path === '/orders' && method === 'post'))
          assert.ok(operation.responses[401], `${method} ${path} documents 401`);
        assert.ok(operation.responses[429], `${method} ${path} documents 429`);
        if (operation.tags?.includes('Services')) {
          // {}: without credentials the answer is the 402 sign-in challenge.
          assert.deepEqual(
            operation.security,
            [{ agentApiKey: [] }, { siwx: [] }, {}],
            `${method} ${path}: the key or the paying wallet`,
          );
          assert.ok(
            operation.responses[402]?.headers?.['PAYMENT-REQUIRED'],
            `${method} ${path} documents the 402 (sign-in challenge or payment)`,
          );
        }
      }
    }
    const references =
      JSON.stringify(document.components.schemas.QuoteRequest) +
      JSON.stringify(document.components.schemas.OrderRequest);
    for (const name of Object.keys(document.components.schemas).filter((n) => n.startsWith('Parameters_')))
      assert.ok(references.includes(`#/components/schemas/${name}`), `${name} is referenced`);
    assert.match(document.info.description, /maxAmountPerPayment/);
    assert.match(document.paths['/orders'].post.description, /above 1 USDC by default/);
  });

  test('the real answers of every operation, success and errors, a paid order included, match the document', async () => {
    for (const [template, path] of [
      ['/health', '/health'],
      ['/products', '/products'],
      ['/products/{product_id}', '/products/instant-stream'],
      ['/pricing', '/pricing'],
      ['/availability', '/availability'],
      ['/audit/head', '/audit/head'],
      ['/openapi.json', '/openapi.json'],
      ['/.well-known/x402', '/.well-known/x402'],
    ]) {
      assert.equal((await call('GET', template, path, { auth: false })).status, 200, path);
    }
    assert.equal(
      (await call('GET', '/products/{product_id}', '/products/no-such-product', { auth: false })).status,
      404,
    );

    assert.equal(
      (
        await call('POST', '/quotes', '/quotes', {
          body: { product_id: 'instant-stream', parameters: order.parameters },
        })
      ).status,
      200,
    );
    assert.equal(
      (await call('POST', '/quotes', '/quotes', { body: { product_id: 'instant-stream' }, auth: false })).status,
      401,
    );
    assert.equal(
      (
        await call('POST', '/quotes', '/quotes', {
          body: { product_id: 'instant-stream', parameters: { duration_hours: 'two' } },
        })
      ).status,
      422,
    );
    assert.equal((await call('POST', '/quotes', '/quotes', { body: { product_id: 'no-such-product' } })).status, 404);
    assert.equal(
      (
        await call('POST', '/quotes', '/quotes', {
          raw: Buffer.from('not json'),
          headers: { 'content-type': 'text/plain' },
        })
      ).status,
      415,
    );

    assert.equal(
      (await call('POST', '/orders', '/orders', { body: order, headers: { 'idempotency-key': 'openapi-ask' } })).status,
      402,
    );
    assert.equal(
      (
        await call('POST', '/orders', '/orders', {
          body: order,
          headers: { 'idempotency-key': 'openapi-ask' },
          auth: false,
        })
      ).status,
      401,
    );
    assert.equal((await call('POST', '/orders', '/orders', { body: order })).status, 400);
    assert.equal(
      (
        await call('POST', '/orders', '/orders', {
          body: { ...order, product_id: 'no-such-product' },
          headers: { 'idempotency-key': 'openapi-404' },
        })
      ).status,
      404,
    );
    assert.equal(
      (
        await call('POST', '/orders', '/orders', {
          body: { ...order, email: 3 },
          headers: { 'idempotency-key': 'openapi-422' },
        })
      ).status,
      422,
    );
    const paid = await buy(service, wallet, order, 'openapi-paid');
    check('POST', '/orders', paid.status, paid.body);
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    const replay = await buy(service, wallet, order, 'openapi-paid');
    check('POST', '/orders', replay.status, replay.body);
    assert.equal(
      (
        await call('POST', '/orders', '/orders', {
          body: { ...order, station_name: 'Other' },
          headers: { 'idempotency-key': 'openapi-paid' },
        })
      ).status,
      409,
    );

    const orderId = paid.body.order.id;
    const serviceId = paid.body.service.service_id;
    const recordingPath = `/services/${serviceId}/recording`;
    assert.equal(
      (await call('PUT', '/services/{service_id}/recording', recordingPath, { body: { enabled: true } })).status,
      200,
    );
    assert.equal(
      (await call('PUT', '/services/{service_id}/recording', recordingPath, { body: { on: 1 } })).status,
      422,
    );
    source = startFfmpegSource(paid.body.service.broadcast_url); // for its HLS and its recording, checked below
    assert.equal((await call('GET', '/orders/{order_id}', `/orders/${orderId}`)).status, 200);
    assert.equal((await call('GET', '/orders/{order_id}', '/orders/ra_nosuchorder1')).status, 404);
    assert.equal((await call('GET', '/orders/{order_id}', `/orders/${orderId}`, { auth: false })).status, 401);
    assert.equal((await call('GET', '/services/{service_id}', `/services/${serviceId}`)).status, 200);
    assert.equal((await call('GET', '/services/{service_id}', '/services/nosuchservice')).status, 404);
    assert.equal((await call('GET', '/services/{service_id}/usage', `/services/${serviceId}/usage`)).status, 200);
    assert.equal((await call('GET', '/services/{service_id}/files', `/services/${serviceId}/files`)).status, 200);
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/now-playing', `/services/${serviceId}/now-playing`, {
          body: { title: 'OpenAPI Song', artist: null },
        })
      ).status,
      200,
    );
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/now-playing', `/services/${serviceId}/now-playing`, {
          body: { name: 'x' },
        })
      ).status,
      422,
    );
    assert.equal(
      (await call('GET', '/services/{service_id}/now-playing', `/services/${serviceId}/now-playing`)).status,
      200,
    );
    assert.equal(
      (await call('GET', '/services/{service_id}/listeners', `/services/${serviceId}/listeners?limit=5`)).status,
      200,
    );
    assert.equal(
      (await call('GET', '/services/{service_id}/listeners', `/services/${serviceId}/listeners?limit=none`)).status,
      400,
    );
    await ownerProfileAndStats(serviceId);
    assert.equal(
      (await call('GET', '/listen/{service_id}/now-playing', `/listen/${serviceId}/now-playing`, { auth: false }))
        .status,
      200,
    );
    assert.equal(
      (await call('GET', '/listen/{service_id}/now-playing', '/listen/nosuchservice/now-playing', { auth: false }))
        .status,
      404,
    );
    assert.equal(
      (
        await call(
          'GET',
          '/listen/oembed',
          `/listen/oembed?url=${encodeURIComponent(`${service.baseUrl}/listen/${serviceId}`)}`,
          { auth: false },
        )
      ).status,
      200,
    );
    assert.equal((await call('GET', '/listen/oembed', '/listen/oembed?url=nowhere', { auth: false })).status, 404);
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/playlist', `/services/${serviceId}/playlist`, {
          body: { playlist: [] },
        })
      ).status,
      409,
    );
    assert.equal(
      (
        await call('POST', '/services/{service_id}/upgrade', `/services/${serviceId}/upgrade`, {
          body: { product_id: 'event-stream' },
          headers: { 'idempotency-key': 'openapi-up' },
        })
      ).status,
      402,
    );
    const paidUpgrade = await payFor(
      service,
      wallet,
      `/services/${serviceId}/upgrade`,
      { product_id: 'event-stream' },
      'openapi-up-paid',
    );
    check('POST', '/services/{service_id}/upgrade', paidUpgrade.status, paidUpgrade.body);
    assert.equal(paidUpgrade.status, 200, JSON.stringify(paidUpgrade.body));
    assert.equal(
      (
        await call('POST', '/services/{service_id}/extend', `/services/${serviceId}/extend`, {
          body: { duration_hours: 1 },
          headers: { 'idempotency-key': 'openapi-ext' },
        })
      ).status,
      402,
    );
    assert.equal(
      (
        await call('POST', '/services/{service_id}/extend', `/services/${serviceId}/extend`, {
          body: { duration_hours: 100_000 },
          headers: { 'idempotency-key': 'openapi-ext-422' },
        })
      ).status,
      422,
    );
    const paidExtension = await payFor(
      service,
      wallet,
      `/services/${serviceId}/extend`,
      { duration_hours: 1 },
      'openapi-ext-paid',
    );
    check('POST', '/services/{service_id}/extend', paidExtension.status, paidExtension.body);
    assert.equal(paidExtension.status, 200, JSON.stringify(paidExtension.body));

    // AutoDJ: files, playlist, delete.
    const autodj = await buy(
      service,
      wallet,
      {
        product_id: 'temporary-autodj',
        email: 'dj@example.com',
        station_name: 'OpenAPI DJ',
        parameters: { duration_hours: 1, bitrate_kbps: 64, storage_mb: 5, listeners: 2 },
      },
      'openapi-dj',
    );
    check('POST', '/orders', autodj.status, autodj.body);
    assert.equal(autodj.status, 200, JSON.stringify(autodj.body));
    const dj = autodj.body.service.service_id;
    const tone = await sine({ seconds: 1 }, mp3());
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/files/{name}', `/services/${dj}/files/tone.mp3`, {
          raw: tone,
          headers: { 'content-type': 'audio/mpeg' },
        })
      ).status,
      201,
    );
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/files/{name}', `/services/${dj}/files/bad.mp3`, {
          raw: Buffer.from('not audio at all'),
          headers: { 'content-type': 'audio/mpeg' },
        })
      ).status,
      422,
    );
    assert.equal((await call('GET', '/services/{service_id}/files', `/services/${dj}/files`)).status, 200);
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/playlist', `/services/${dj}/playlist`, {
          body: { playlist: ['tone.mp3'], shuffle: false },
        })
      ).status,
      200,
    );
    assert.equal(
      (
        await call('PUT', '/services/{service_id}/playlist', `/services/${dj}/playlist`, {
          body: { playlist: ['missing.mp3'] },
        })
      ).status,
      422,
    );
    assert.equal(
      (await call('DELETE', '/services/{service_id}/files/{name}', `/services/${dj}/files/tone.mp3`)).status,
      200,
    );
    assert.equal(
      (await call('DELETE', '/services/{service_id}/files/{name}', `/services/${dj}/files/tone.mp3`)).status,
      404,
    );
    const stopped = await call('POST', '/services/{service_id}/stop', `/services/${dj}/stop`);
    assert.equal(stopped.status, 200);
    assert.equal(
      (await call('POST', '/services/{service_id}/stop', `/services/${dj}/stop`)).body.idempotent_replay,
      true,
    );
    assert.equal((await call('POST', '/services/{service_id}/stop', '/services/nosuchservice/stop')).status, 404);
    assert.equal(
      (await call('GET', '/services/{service_id}/usage', `/services/${dj}/usage`)).body.usage.ended.reason,
      'stopped',
    );

    // A refund request in the form of the x402 refund extension proposal, for the stopped service's order.
    const refundKey = `openapi-refund-${Date.now()}`;
    const unsigned = {
      x402Version: 2 as const,
      paymentReference: { txHash: autodj.body.order.payment.transaction, network: 'eip155:8453' },
      amount: '1',
      reason: 'customer_request',
      idempotencyKey: refundKey,
    };
    const buyerKey = (await devFile(service)).buyer.private_key;
    const signedBy = async (key: `0x${string}`, request: typeof unsigned) => ({
      ...request,
      payerSignature: await privateKeyToAccount(key).signTypedData(refundRequestTypedData(request)),
    });
    const refunded = await call('POST', '/x402/refund', '/x402/refund', {
      auth: false,
      body: await signedBy(buyerKey, unsigned),
    });
    assert.ok([200, 202].includes(refunded.status), JSON.stringify(refunded.body));
    const polled = await call('GET', '/x402/refund/{idempotency_key}', `/x402/refund/${refundKey}`, { auth: false });
    assert.ok([200, 202].includes(polled.status), JSON.stringify(polled.body));
    const strangers = await signedBy(generatePrivateKey(), { ...unsigned, idempotencyKey: `${refundKey}-stranger` });
    assert.equal((await call('POST', '/x402/refund', '/x402/refund', { auth: false, body: strangers })).status, 403);
    assert.equal(
      (await call('GET', '/x402/refund/{idempotency_key}', '/x402/refund/nosuchkey', { auth: false })).status,
      404,
    );

    // Keys, by wallet sign-in: the 402 challenge, then the signed request (each challenge is accepted once).
    const account = privateKeyToAccount(generatePrivateKey());
    const signIn = async (method: string, template: string, path: string, who = account) => {
      const asked = await call(method, template, path, { auth: false });
      assert.equal(asked.status, 402, `${method} ${path}`);
      return signedHeader(challengeOf(asked), who);
    };
    const keyHeader = await signIn('POST', '/keys', '/keys');
    const issued = await call('POST', '/keys', '/keys', {
      auth: false,
      body: { name: 'openapi' },
      headers: { 'sign-in-with-x': keyHeader },
    });
    assert.equal(issued.status, 201);
    assert.equal(
      (
        await call('POST', '/keys', '/keys', {
          auth: false,
          body: { name: 'again' },
          headers: { 'sign-in-with-x': keyHeader },
        })
      ).status,
      401,
    );
    assert.equal(
      (
        await call('POST', '/keys', '/keys', {
          auth: false,
          body: { name: 3 },
          headers: { 'sign-in-with-x': await signIn('POST', '/keys', '/keys') },
        })
      ).status,
      422,
    );
    assert.equal(
      (
        await call('GET', '/keys', '/keys', {
          auth: false,
          headers: { 'sign-in-with-x': await signIn('GET', '/keys', '/keys') },
        })
      ).status,
      200,
    );
    const keyPath = `/keys/${issued.body.key.id}`;
    assert.equal(
      (
        await call('DELETE', '/keys/{key_id}', keyPath, {
          auth: false,
          headers: { 'sign-in-with-x': await signIn('DELETE', '/keys/{key_id}', keyPath) },
        })
      ).status,
      200,
    );
    assert.equal(
      (
        await call('DELETE', '/keys/{key_id}', keyPath, {
          auth: false,
          headers: { 'sign-in-with-x': await signIn('DELETE', '/keys/{key_id}', keyPath) },
        })
      ).status,
      404,
    );

    // Services: by key, and by the wallet that paid for them.
    const buyer = privateKeyToAccount((await devFile(service)).buyer.private_key);
    assert.equal((await call('GET', '/services', '/services')).status, 200);
    assert.ok(
      (
        await call('GET', '/services', '/services', {
          auth: false,
          headers: { 'sign-in-with-x': await signIn('GET', '/services', '/services', buyer) },
        })
      ).body.services.some((s: any) => s.service_id === serviceId),
    );
    assert.equal(
      (
        await call('GET', '/services', '/services', {
          auth: true,
          headers: { authorization: 'Bearer aak_0000000000000000_nope' },
        })
      ).status,
      401,
    );
    const servicePath = `/services/${serviceId}`;
    assert.equal(
      (
        await call('GET', '/services/{service_id}', servicePath, {
          auth: false,
          headers: { 'sign-in-with-x': await signIn('GET', '/services/{service_id}', servicePath, buyer) },
        })
      ).status,
      200,
    );
    assert.equal(
      (await call('GET', '/services/{service_id}/usage', `${servicePath}/usage`, { auth: false })).status,
      402,
    );

    // Webhooks.
    const hook = { url: 'http://127.0.0.1:9/hook', service_id: serviceId };
    const registered = await call('POST', '/webhooks', '/webhooks', { body: hook });
    assert.equal(registered.status, 201);
    assert.equal((await call('POST', '/webhooks', '/webhooks', { body: hook, auth: false })).status, 401);
    assert.equal(
      (await call('POST', '/webhooks', '/webhooks', { body: { url: 'ftp://example.com/hook' } })).status,
      422,
    );
    assert.equal(
      (await call('POST', '/webhooks', '/webhooks', { body: { ...hook, service_id: 'nosuchservice' } })).status,
      404,
    );
    assert.equal((await call('GET', '/webhooks', '/webhooks')).status, 200);
    assert.equal((await call('GET', '/webhooks', '/webhooks', { auth: false })).status, 401);
    const hookPath = `/webhooks/${registered.body.webhook.id}`;
    assert.equal((await call('POST', '/webhooks/{webhook_id}/rotate-secret', `${hookPath}/rotate-secret`)).status, 200);
    assert.equal(
      (await call('POST', '/webhooks/{webhook_id}/rotate-secret', '/webhooks/whk_nosuchhook00/rotate-secret')).status,
      404,
    );
    assert.equal((await call('DELETE', '/webhooks/{webhook_id}', hookPath)).status, 200);
    assert.equal((await call('DELETE', '/webhooks/{webhook_id}', hookPath)).status, 404);

    // Server-Sent Events: the stream itself is text/event-stream (as documented); its errors are JSON.
    const events = document.paths['/services/{service_id}/events'].get;
    assert.ok(events.responses[200].content['text/event-stream'], 'the document declares text/event-stream');
    const stream = new AbortController();
    const opened = await fetch(`${service.baseUrl}${servicePath}/events`, {
      headers: { authorization: `Bearer ${service.apiKey}` },
      signal: stream.signal,
    });
    assert.equal(opened.status, 200);
    assert.match(opened.headers.get('content-type') ?? '', /^text\/event-stream/);
    stream.abort();
    checked.add('GET /services/{service_id}/events 200');
    assert.equal(
      (await call('GET', '/services/{service_id}/events', `${servicePath}/events`, { auth: false })).status,
      401,
    );
    assert.equal((await call('GET', '/services/{service_id}/events', '/services/nosuchservice/events')).status, 404);
    assert.equal(
      (await call('GET', '/services/{service_id}/events', `${servicePath}/events?last_event_id=nosuchevent`)).status,
      422,
    );

    // MCP (Streamable HTTP): JSON-RPC answers, and our error document where the body is not JSON.
    const mcpAccept = { accept: 'application/json, text/event-stream' };
    const initialize = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'openapi-test', version: '1' } },
    };
    assert.ok((await call('POST', '/mcp', '/mcp', { body: initialize, headers: mcpAccept })).body.result);
    const tools = await call('POST', '/mcp', '/mcp', {
      body: { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      headers: mcpAccept,
    });
    assert.ok(
      tools.body.result.tools.some((t: any) => t.name === 'order'),
      JSON.stringify(tools.body).slice(0, 300),
    );
    const refused = await call('POST', '/mcp', '/mcp', {
      body: {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'service_status', arguments: { service_id: serviceId } },
      },
      headers: { ...mcpAccept, authorization: 'Bearer aak_0000000000000000_nope' },
    });
    assert.equal(refused.body.result.isError, true, JSON.stringify(refused.body).slice(0, 300));
    assert.equal((await call('POST', '/mcp', '/mcp', { body: { hello: 'world' }, headers: mcpAccept })).status, 400);
    assert.equal((await call('POST', '/mcp', '/mcp', { body: [initialize], headers: mcpAccept })).status, 400);
    assert.equal(
      (await call('POST', '/mcp', '/mcp', { body: initialize, headers: { accept: 'application/json' } })).status,
      406,
    );
    assert.equal(
      (
        await call('POST', '/mcp', '/mcp', {
          raw: Buffer.from('not json'),
          headers: { ...mcpAccept, 'content-type': 'text/plain' },
        })
      ).status,
      415,
    );
    assert.equal(
      (
        await call('POST', '/mcp', '/mcp', {
          body: initialize,
          headers: { ...mcpAccept, 'content-type': 'application/vnd.mcp+json' },
        })
      ).status,
      415,
    );
    assert.equal(
      (
        await call('POST', '/mcp', '/mcp', {
          raw: Buffer.from('{"jsonrpc":'),
          headers: { ...mcpAccept, 'content-type': 'application/json' },
        })
      ).status,
      422,
    );

    // HLS: playlists and segments are not JSON (as documented); their errors are.
    const master = await waitFor(
      'the HLS playlist',
      async () => {
        const answer = await fetch(paid.body.service.endpoints.hls_url);
        return answer.status === 200 ? answer.text() : (await answer.arrayBuffer(), undefined);
      },
      40_000,
    );
    const hlsUrl = paid.body.service.endpoints.hls_url;
    const media = new URL(master.split('\n').find((line) => line.includes('live.m3u8?session='))!, hlsUrl);
    const mediaText = await (await fetch(media)).text();
    // The playlist names each segment on the segment server (nginx); serve answers the same name under /hls too.
    const published = new URL(
      mediaText
        .split('\n')
        .filter((line) => line && !line.startsWith('#'))
        .at(-1)!,
      media,
    );
    for (const address of [published, new URL(published.pathname.split('/').at(-1)!, hlsUrl)]) {
      const segment = await fetch(address);
      assert.equal(segment.headers.get('content-type'), 'video/mp2t', address.href);
      await segment.arrayBuffer();
    }
    const hlsOperations = ['index.m3u8', 'live.m3u8', '{segment}'];
    for (const operation of hlsOperations) checked.add(`GET /hls/{service_id}/${operation} 200`);
    const hls = (operation: string, path: string) =>
      call('GET', `/hls/{service_id}/${operation}`, path, { auth: false });
    assert.equal((await hls('index.m3u8', '/hls/nosuchservice/index.m3u8')).status, 404);
    assert.equal((await hls('live.m3u8', `/hls/${serviceId}/live.m3u8?session=short`)).status, 400);
    assert.equal((await hls('{segment}', `/hls/${serviceId}/seg1.ts?session=short`)).status, 404);

    // Recordings: the show being recorded (the owner reads it), the feed (RSS, not JSON), its deletion.
    const recordings = `/services/${serviceId}/recordings`;
    const listed = await call('GET', '/services/{service_id}/recordings', recordings);
    assert.equal(listed.body.recordings.length, 1, 'the live show records');
    const recording = listed.body.recordings[0];
    const audio = await fetch(recording.download_url, { headers: { authorization: `Bearer ${service.apiKey}` } });
    assert.equal(audio.headers.get('content-type'), 'audio/mpeg');
    assert.ok((await audio.arrayBuffer()).byteLength > 0);
    checked.add('GET /services/{service_id}/recordings/{recording_id} 200');
    const feed = await fetch(paid.body.service.endpoints.podcast_feed);
    assert.match(await feed.text(), /<rss version="2.0"/);
    checked.add('GET /services/{service_id}/podcast.xml 200');
    // Retention is sold on finished shows; a show is finished a minute after its source leaves. This test checks the
    // document's shapes, so it ends the show in the database (test/recording-retention.test.ts takes the real path).
    const retentionOp = '/services/{service_id}/recordings/retention';
    const retention = `${recordings}/retention`;
    const keyed = (body: unknown, key: string) => ({ body, headers: { 'idempotency-key': key } });
    const unfinished = await call('POST', retentionOp, retention, keyed({ retention_days: 30 }, 'openapi-keep-409'));
    assert.equal(unfinished.status, 409, JSON.stringify(unfinished.body));
    await endShow(recording.recording_id);
    const days = { retention_days: 30 };
    assert.equal((await call('POST', retentionOp, retention, keyed(days, 'openapi-keep'))).status, 402);
    const noDays = keyed({ retention_days: 0 }, 'openapi-keep-422');
    assert.equal((await call('POST', retentionOp, retention, noDays)).status, 422);
    const kept = await payFor(service, wallet, retention, days, 'openapi-retention-paid');
    check('POST', retentionOp, kept.status, kept.body);
    assert.equal(kept.status, 200, JSON.stringify(kept.body));
    const fileOp = '/services/{service_id}/recordings/{recording_id}';
    assert.equal((await call('GET', fileOp, `${recordings}/rec_nosuchrecording`, { auth: false })).status, 404);
    const deleteOp = '/services/{service_id}/recordings/{recording_id}';
    assert.equal((await call('DELETE', deleteOp, `${recordings}/${recording.recording_id}`)).status, 200);
    assert.equal((await call('DELETE', deleteOp, `${recordings}/${recording.recording_id}`)).status, 404);

    // Every operation of the document was answered at least once with a success.
    const operations = Object.entries<any>(document.paths).flatMap(([path, item]) =>
      Object.keys(item)
        .filter((m) => m !== 'servers')
        .map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const operation of operations)
      assert.ok(
        [...checked].some((c) => c.startsWith(`${operation} 2`)),
        `${operation} was checked with a success: ${[...checked].join(', ')}`,
      );
  });

  test('Redocly lint with the recommended rules reports no error, on the served document and the offline one', async () => {
    const file = join(await scratchDir('openapi-'), 'openapi.json');
    await writeFile(file, JSON.stringify(document));
    const served = spawnSync(
      join(root, 'node_modules/.bin/redocly'),
      ['lint', '--extends', 'recommended', '--format', 'json', file],
      { encoding: 'utf8', cwd: root },
    );
    assert.equal(served.status, 0, served.stdout + served.stderr);
    const report = JSON.parse(served.stdout.slice(served.stdout.indexOf('{')));
    assert.equal(report.totals.errors, 0, served.stdout);
    const offline = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/lint-openapi.ts'], {
      encoding: 'utf8',
      cwd: root,
    });
    assert.equal(offline.status, 0, offline.stdout + offline.stderr);
  });
});
