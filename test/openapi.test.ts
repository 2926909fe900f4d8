import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { buy, payFor } from './support/purchase.js';
import { root, scratchDir, startService, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';

// /openapi.json describes what the service really answers: every real answer of every operation (status and body)
// validates against the response the document states for it, and Redocly's recommended rules find no error.

let service: Service;
let wallet: TestWallet;
let origin: string;
let document: any;
let validators: (schema: unknown) => (value: unknown) => string | undefined;
before(async () => {
  service = await startService();
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  origin = new URL(service.baseUrl).origin;
  document = await (await fetch(`${service.baseUrl}/openapi.json`)).json();
  // Not strict: OpenAPI's own keywords (example, discriminator) and type unions are part of the document.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const local = (value: unknown) => JSON.parse(JSON.stringify(value).replaceAll('"#/components/schemas/', '"openapi#/$defs/'));
  ajv.addSchema({ $id: 'openapi', $defs: local(document.components.schemas) });
  validators = (schema) => {
    const validate = ajv.compile(local(schema));
    return (value) => (validate(value) ? undefined : ajv.errorsText(validate.errors));
  };
});
after(() => service?.stop());

const checked = new Set<string>();

/** Calls the API and checks the answer against the document's response for this operation and status. */
async function call(method: string, template: string, path: string, init: { body?: unknown; raw?: Buffer; headers?: Record<string, string>; auth?: boolean } = {}) {
  const headers: Record<string, string> = { ...(init.auth !== false && { authorization: `Bearer ${service.apiKey}` }), ...init.headers };
  if (init.body !== undefined) headers['content-type'] ??= 'application/json';
  const url = template.startsWith('/.well-known') ? `${origin}${path}` : `${service.baseUrl}${path}`;
  const response = await fetch(url, { method, headers, body: (init.raw ?? (init.body !== undefined ? JSON.stringify(init.body) : undefined)) as BodyInit | undefined }).catch((e) => { throw new Error(`${method} ${url}: ${e.cause?.message ?? e.message}`); });
  const body = await response.json();
  return { status: response.status, headers: response.headers, body: check(method, template, response.status, body) };
}

function check(method: string, template: string, status: number, body: unknown): any {
  const operation = document.paths[template]?.[method.toLowerCase()];
  assert.ok(operation, `${method} ${template} is in the document`);
  const response = operation.responses[String(status)];
  assert.ok(response, `${method} ${template} documents ${status}: ${JSON.stringify(body).slice(0, 300)}`);
  const schema = response.content?.['application/json']?.schema;
  assert.ok(schema, `${method} ${template} ${status} has a JSON schema`);
  const problem = validators(schema)(body);
  assert.equal(problem, undefined, `${method} ${template} ${status}: ${problem}\n${JSON.stringify(body).slice(0, 600)}`);
  checked.add(`${method} ${template} ${status}`);
  return body;
}

const order = { product_id: 'instant-stream', email: 'agent@example.com', station_name: 'OpenAPI FM', parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 } };

describe('/openapi.json', () => {
  test('every operation states its security (empty where public) and references the Parameters_* schemas', () => {
    for (const [path, item] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        if (method === 'servers') continue;
        if (path === '/orders' && method === 'post') {
          assert.equal(operation.security, undefined, 'spec 5.4: POST /orders has no security requirement of its own');
          assert.deepEqual(document.security, [{ agentApiKey: [] }], 'so the document\'s default (the bearer key) applies');
        } else {
          assert.ok(Array.isArray(operation.security), `${method} ${path} states security`);
        }
        for (const [status, response] of Object.entries<any>(operation.responses)) {
          if (Number(status) >= 400) assert.equal(response.content['application/json'].schema.$ref, '#/components/schemas/Error', `${method} ${path} ${status}`);
        }
        if (operation.security?.length || (path === '/orders' && method === 'post')) assert.ok(operation.responses[401], `${method} ${path} documents 401`);
        assert.ok(operation.responses[429], `${method} ${path} documents 429`);
      }
    }
    const references = JSON.stringify(document.components.schemas.QuoteRequest) + JSON.stringify(document.components.schemas.OrderRequest);
    for (const name of Object.keys(document.components.schemas).filter((n) => n.startsWith('Parameters_'))) assert.ok(references.includes(`#/components/schemas/${name}`), `${name} is referenced`);
    assert.match(document.info.description, /maxAmountPerPayment/);
    assert.match(document.paths['/orders'].post.description, /above 1 USDC by default/);
  });

  test('the real answers of every operation, success and errors, a paid order included, match the document', async () => {
    for (const [template, path] of [['/health', '/health'], ['/products', '/products'], ['/products/{product_id}', '/products/instant-stream'], ['/pricing', '/pricing'],
      ['/availability', '/availability'], ['/audit/head', '/audit/head'], ['/openapi.json', '/openapi.json'], ['/.well-known/x402', '/.well-known/x402']]) {
      assert.equal((await call('GET', template, path, { auth: false })).status, 200, path);
    }
    assert.equal((await call('GET', '/products/{product_id}', '/products/no-such-product', { auth: false })).status, 404);

    assert.equal((await call('POST', '/quotes', '/quotes', { body: { product_id: 'instant-stream', parameters: order.parameters } })).status, 200);
    assert.equal((await call('POST', '/quotes', '/quotes', { body: { product_id: 'instant-stream' }, auth: false })).status, 401);
    assert.equal((await call('POST', '/quotes', '/quotes', { body: { product_id: 'instant-stream', parameters: { duration_hours: 'two' } } })).status, 422);
    assert.equal((await call('POST', '/quotes', '/quotes', { body: { product_id: 'no-such-product' } })).status, 404);
    assert.equal((await call('POST', '/quotes', '/quotes', { raw: Buffer.from('not json'), headers: { 'content-type': 'text/plain' } })).status, 415);

    assert.equal((await call('POST', '/orders', '/orders', { body: order, headers: { 'idempotency-key': 'openapi-ask' } })).status, 402);
    assert.equal((await call('POST', '/orders', '/orders', { body: order, headers: { 'idempotency-key': 'openapi-ask' }, auth: false })).status, 401);
    assert.equal((await call('POST', '/orders', '/orders', { body: order })).status, 400);
    assert.equal((await call('POST', '/orders', '/orders', { body: { ...order, product_id: 'no-such-product' }, headers: { 'idempotency-key': 'openapi-404' } })).status, 404);
    assert.equal((await call('POST', '/orders', '/orders', { body: { ...order, email: 3 }, headers: { 'idempotency-key': 'openapi-422' } })).status, 422);
    const paid = await buy(service, wallet, order, 'openapi-paid');
    check('POST', '/orders', paid.status, paid.body);
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    const replay = await buy(service, wallet, order, 'openapi-paid');
    check('POST', '/orders', replay.status, replay.body);
    assert.equal((await call('POST', '/orders', '/orders', { body: { ...order, station_name: 'Other' }, headers: { 'idempotency-key': 'openapi-paid' } })).status, 409);

    const orderId = paid.body.order.id;
    const serviceId = paid.body.service.service_id;
    assert.equal((await call('GET', '/orders/{order_id}', `/orders/${orderId}`)).status, 200);
    assert.equal((await call('GET', '/orders/{order_id}', '/orders/ra_nosuchorder1')).status, 404);
    assert.equal((await call('GET', '/orders/{order_id}', `/orders/${orderId}`, { auth: false })).status, 401);
    assert.equal((await call('GET', '/services/{service_id}', `/services/${serviceId}`)).status, 200);
    assert.equal((await call('GET', '/services/{service_id}', '/services/nosuchservice')).status, 404);
    assert.equal((await call('GET', '/services/{service_id}/usage', `/services/${serviceId}/usage`)).status, 200);
    assert.equal((await call('GET', '/services/{service_id}/files', `/services/${serviceId}/files`)).status, 200);
    assert.equal((await call('PUT', '/services/{service_id}/playlist', `/services/${serviceId}/playlist`, { body: { playlist: [] } })).status, 409);
    assert.equal((await call('POST', '/services/{service_id}/upgrade', `/services/${serviceId}/upgrade`, { body: { product_id: 'event-stream' }, headers: { 'idempotency-key': 'openapi-up' } })).status, 402);
    const paidUpgrade = await payFor(service, wallet, `/services/${serviceId}/upgrade`, { product_id: 'event-stream' }, 'openapi-up-paid');
    check('POST', '/services/{service_id}/upgrade', paidUpgrade.status, paidUpgrade.body);
    assert.equal(paidUpgrade.status, 200, JSON.stringify(paidUpgrade.body));

    // AutoDJ: files, playlist, delete.
    const autodj = await buy(service, wallet, { product_id: 'temporary-autodj', email: 'dj@example.com', station_name: 'OpenAPI DJ', parameters: { duration_hours: 1, bitrate_kbps: 64, storage_mb: 5, listeners: 2 } }, 'openapi-dj');
    check('POST', '/orders', autodj.status, autodj.body);
    assert.equal(autodj.status, 200, JSON.stringify(autodj.body));
    const dj = autodj.body.service.service_id;
    const tone = spawnSync('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=1', '-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3', 'pipe:1'], { maxBuffer: 1 << 24 });
    assert.equal(tone.status, 0, String(tone.stderr));
    assert.equal((await call('PUT', '/services/{service_id}/files/{name}', `/services/${dj}/files/tone.mp3`, { raw: tone.stdout, headers: { 'content-type': 'audio/mpeg' } })).status, 201);
    assert.equal((await call('PUT', '/services/{service_id}/files/{name}', `/services/${dj}/files/bad.mp3`, { raw: Buffer.from('not audio at all'), headers: { 'content-type': 'audio/mpeg' } })).status, 422);
    assert.equal((await call('GET', '/services/{service_id}/files', `/services/${dj}/files`)).status, 200);
    assert.equal((await call('PUT', '/services/{service_id}/playlist', `/services/${dj}/playlist`, { body: { playlist: ['tone.mp3'], shuffle: false } })).status, 200);
    assert.equal((await call('PUT', '/services/{service_id}/playlist', `/services/${dj}/playlist`, { body: { playlist: ['missing.mp3'] } })).status, 422);
    assert.equal((await call('DELETE', '/services/{service_id}/files/{name}', `/services/${dj}/files/tone.mp3`)).status, 200);
    assert.equal((await call('DELETE', '/services/{service_id}/files/{name}', `/services/${dj}/files/tone.mp3`)).status, 404);

    // Every operation of the document was answered at least once with a success.
    const operations = Object.entries<any>(document.paths).flatMap(([path, item]) => Object.keys(item).filter((m) => m !== 'servers').map((m) => `${m.toUpperCase()} ${path}`));
    for (const operation of operations) assert.ok([...checked].some((c) => c.startsWith(`${operation} 2`)), `${operation} was checked with a success: ${[...checked].join(', ')}`);
  });

  test('Redocly lint with the recommended rules reports no error, on the served document and the offline one', async () => {
    const file = join(await scratchDir('openapi-'), 'openapi.json');
    await writeFile(file, JSON.stringify(document));
    const served = spawnSync(join(root, 'node_modules/.bin/redocly'), ['lint', '--extends', 'recommended', '--format', 'json', file], { encoding: 'utf8', cwd: root });
    assert.equal(served.status, 0, served.stdout + served.stderr);
    const report = JSON.parse(served.stdout.slice(served.stdout.indexOf('{')));
    assert.equal(report.totals.errors, 0, served.stdout);
    const offline = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/lint-openapi.ts'], { encoding: 'utf8', cwd: root });
    assert.equal(offline.status, 0, offline.stdout + offline.stderr);
  });
});
