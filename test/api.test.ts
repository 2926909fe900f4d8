import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { copyCatalog, request, startService, type Service } from './support/service.js';
import { devFile } from './support/dev-file.js';
import { connectDatabase, serveLock } from './support/serve-lock.js';

let service: Service;
let catalog: Awaited<ReturnType<typeof copyCatalog>>;

before(async () => {
  catalog = await copyCatalog();
  // Headers must arrive within 3 s (10 s in serve by default): the slow-headers test waits that out.
  service = await startService({
    CATALOG_DIR: catalog.catalogDir,
    RULES_DIR: catalog.rulesDir,
    HEADERS_TIMEOUT_MS: '3000',
  });
});
after(async () => {
  await service?.stop();
  await catalog?.remove();
});

const get = (path: string) => request(service, 'GET', path, { auth: false });
const quote = (body: unknown, headers: Record<string, string> = {}) =>
  request(service, 'POST', '/quotes', { body, headers });
const instant = {
  product_id: 'instant-stream',
  parameters: { duration_hours: 2, max_listeners: 10, bitrate_kbps: 128 },
};

/** The service's own database, for checks of what it stored. */
async function withDatabase<T>(use: (client: import('pg').Client) => Promise<T>): Promise<T> {
  const pg = (await import('pg')).default;
  const client = await connectDatabase(service);
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

const auditRecordCount = () =>
  withDatabase(async (client) => Number((await client.query('SELECT count(*) AS n FROM audit_records')).rows[0].n));

/** The report lines of `audit replay --all` (one JSON object per record, then a summary line). */
const replayReports = (stdout: string): any[] =>
  stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));

function assertErrorDocument(response: { status: number; headers: Headers; body: any }, status: number, code: string) {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.equal(response.body.ok, false);
  assert.equal(response.body.error.code, code);
  assert.equal(typeof response.body.error.message, 'string');
  assert.ok(response.body.error.message.length > 20, 'the message tells the agent what to do');
  assert.equal(typeof response.body.error.retryable, 'boolean');
  assert.equal(response.body.error.request_id, response.headers.get('x-request-id'));
}

describe('discovery', () => {
  test('GET /products lists the 9 products of catalog version 2 with every field', async () => {
    const { status, body } = await get('/products');
    assert.equal(status, 200);
    assert.equal(body.ok, true);
    assert.equal(body.catalog_version, 2);
    assert.equal(body.count, 9);
    assert.deepEqual(
      body.products.map((p: any) => p.id),
      [
        'radio-directo',
        'radio-local',
        'radio-local-plus',
        'instant-stream',
        'event-stream',
        'streaming-boost-relay',
        'temporary-autodj',
        'temporary-audio',
        'audio-storage-api',
      ],
    );
    for (const p of body.products) {
      for (const field of [
        'id',
        'name',
        'type',
        'billing_type',
        'status',
        'pricing_status',
        'orderable',
        'pricing',
        'parameters',
        'limits',
        'payment',
      ])
        assert.ok(field in p, `${p.id}.${field}`);
      assert.equal(p.unlisted_parameters, undefined, 'editor-only fields are not published');
    }
    const autodj = body.products.find((p: any) => p.id === 'temporary-autodj');
    assert.deepEqual(
      autodj.pricing.packages.map((p: any) => [p.id, p.max_duration_hours, p.max_storage_mb, p.amount_atomic]),
      [
        ['24h-5gb', 24, 5120, '490000'],
        ['7d-5gb', 168, 5120, '1900000'],
        ['30d-10gb', 720, 10240, '6900000'],
      ],
    );
    const relay = body.products.find((p: any) => p.id === 'streaming-boost-relay');
    assert.equal(relay.fulfillment.ssrf_protection, 'public_http_https_only');
    assert.equal(relay.fulfillment.source_stream_url_required, true);
  });

  test('GET /products/{id}: the product, or a 404 error document for unknown and malformed ids', async () => {
    const found = await get('/products/event-stream');
    assert.equal(found.status, 200);
    assert.equal(found.body.product.id, 'event-stream');
    assertErrorDocument(await get('/products/no-such-product'), 404, 'product_not_found');
    assertErrorDocument(await get('/products/Bad_ID!'), 404, 'product_not_found');
    assertErrorDocument(await get('/products/' + 'a'.repeat(90)), 404, 'product_not_found');
  });

  test('GET /pricing and /availability', async () => {
    const pricing = await get('/pricing');
    assert.equal(pricing.body.ok, true);
    assert.equal(pricing.body.currency, null);
    assert.deepEqual(pricing.body.currencies, ['EUR', 'USDC']);
    assert.equal(pricing.body.prices.length, 9);

    const { body } = await get('/availability');
    assert.equal(body.ok, true);
    assert.equal(body.agent_checkout.configured, true, 'development mode pays on the embedded chain');
    assert.equal(body.agent_checkout.protocol, 'x402');
    assert.equal(body.agent_checkout.network, 'eip155:8453');
    for (const p of body.products) assert.equal(p.available_now, p.agent_orderable, p.product_id);
    assert.deepEqual(
      body.products.filter((p: any) => p.agent_orderable).map((p: any) => p.product_id),
      ['radio-directo', 'instant-stream', 'event-stream', 'temporary-autodj', 'audio-storage-api'],
    );
    for (const p of body.products) assert.ok(p.reason.length > 0);
  });

  test('GET /health reports version, catalog version and content hash, and the database', async () => {
    // Every dependency answers once the service is up; on a loaded machine one may miss a probe for a moment.
    let { status, body } = await get('/health');
    for (let i = 0; i < 60 && body.status !== 'ok'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      ({ status, body } = await get('/health'));
    }
    assert.equal(status, 200);
    assert.equal(body.ok, true);
    assert.equal(body.status, 'ok', `checks: ${JSON.stringify(body.checks)}`);
    assert.equal(body.catalog.catalog_version, 2);
    assert.match(body.catalog.content_hash, /^sha256:[0-9a-f]{64}$/);
    assert.equal(body.checks.database.ok, true);
    assert.equal(body.checks.chain.ok, true, 'the embedded chain answers');
    const details = (await (await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as any;
    assert.match(details.checks.chain.block, /^\d+$/, "the chain height is on the operator's listener");
    assert.equal(typeof body.checks.icecast.ok, 'boolean');
    const check = await service.cli(['catalog', 'check']);
    assert.ok(check.stdout.includes(body.catalog.content_hash), 'same hash as catalog check');
  });

  test('GET /openapi.json is OpenAPI 3.1 with the x402 payment metadata', async () => {
    const { body } = await get('/openapi.json');
    assert.equal(body.openapi, '3.1.0');
    const order = body.paths['/orders'].post;
    assert.deepEqual(
      { ...order['x-payment-info'] },
      {
        protocol: 'x402',
        x402Version: 2,
        pricing_mode: 'dynamic',
        currency: 'USD',
        minimum: '0.27',
        maximum: '16.15',
        network: 'eip155:8453',
        asset: 'USDC',
        price: { mode: 'dynamic', currency: 'USD', min: '0.27', max: '16.15', minimum: '0.27', maximum: '16.15' },
        protocols: [{ x402: {} }],
      },
    );
    assert.match(order.parameters[0].description, /Reuse the same Idempotency-Key when you retry/);
    // Spec 5.4: POST /orders declares no security requirement of its own, describes the bearer key and answers 401.
    assert.equal(order.security, undefined);
    assert.match(order.description, /Authorization: Bearer <AGENT_API_KEY>/);
    assert.ok(order.responses[401] && order.responses[404] && order.responses[422]);
    assert.deepEqual(body.paths['/quotes'].post.security, [{ agentApiKey: [] }]);
    assert.deepEqual(body.components.schemas.QuoteRequest.required, ['product_id']);
    assert.deepEqual(body.components.schemas.Parameters_temporary_autodj.required, [
      'duration_hours',
      'bitrate_kbps',
      'storage_mb',
    ]);
    assert.equal(body.components.schemas.Parameters_instant_stream.properties.transfer_gb.maximum, 100);
    for (const path of [
      '/orders/{order_id}',
      '/services/{service_id}',
      '/services/{service_id}/upgrade',
      '/services/{service_id}/usage',
      '/services/{service_id}/files/{name}',
      '/services/{service_id}/playlist',
    ])
      assert.ok(body.paths[path], path);
    assert.deepEqual(body.paths['/services/{service_id}/usage'].get.tags, ['Services']);
  });

  test('unknown routes and methods get error documents', async () => {
    assertErrorDocument(await get('/nothing-here'), 404, 'route_not_found');
    assertErrorDocument(await request(service, 'DELETE', '/products', { auth: false }), 405, 'method_not_allowed');
  });
});

describe('POST /quotes', () => {
  test('needs a valid bearer key', async () => {
    const missing = await request(service, 'POST', '/quotes', { body: instant, auth: false });
    assertErrorDocument(missing, 401, 'authentication_required');
    assert.match(missing.headers.get('www-authenticate')!, /^Bearer/);
    const wrong = await request(service, 'POST', '/quotes', {
      body: instant,
      auth: false,
      headers: { authorization: 'Bearer aak_0000000000000000_' + 'x'.repeat(43) },
    });
    assertErrorDocument(wrong, 401, 'invalid_api_key');
    assert.match(wrong.headers.get('www-authenticate')!, /^Bearer/);
  });

  test('returns the exact price, breakdown, configuration and expiry', async () => {
    const before = Date.now();
    const { status, body } = await quote({
      product_id: 'temporary-autodj',
      parameters: { duration_hours: 48, bitrate_kbps: 96, storage_mb: 2048, transfer_gb: 0.5 },
    });
    assert.equal(status, 200, JSON.stringify(body));
    const q = body.quote;
    assert.match(q.id, /^qt_/);
    assert.deepEqual(q.price, { amount: '1.9075', amount_atomic: '1907500', currency: 'USDC', decimals: 6 });
    assert.equal(q.currency, 'USDC');
    assert.deepEqual(q.configuration, {
      duration_hours: 48,
      listeners: 50,
      bitrate_kbps: 96,
      storage_mb: 2048,
      transfer_gb: 0.5,
    });
    assert.deepEqual(
      q.breakdown.map((l: any) => [l.code, l.quantity, l.unit, l.rate, l.amount_atomic]),
      [
        ['package', '1', 'package', '1.9', '1900000'],
        ['transfer', '0.5', 'GB', '0.015', '7500'],
      ],
    );
    assert.equal(q.formula, 'smallest duration/storage package plus (transfer_gb x 0.015 USDC)');
    assert.equal(q.transfer_policy, 'estimated_included_limit');
    assert.equal(q.pricing_status, 'approved');
    assert.equal(q.agent_orderable, true);
    const ttl = Date.parse(q.expires_at_quote) - before;
    assert.ok(ttl >= 299_000 && ttl <= 301_000 + 5000, `expires in ${ttl} ms`);
    assert.equal(body.idempotency, undefined);
  });

  test('lists every parameter problem with a JSON pointer, without coercion', async () => {
    const { status, body } = await quote({
      product_id: 'instant-stream',
      parameters: { duration_hours: '24', max_listeners: 0, colour: 'red' },
    });
    assertErrorDocument(
      { status, body, headers: new Headers({ 'x-request-id': body.error.request_id }) },
      422,
      'invalid_parameters',
    );
    const pointers = body.error.details.map((d: any) => d.pointer).sort();
    assert.deepEqual(pointers, [
      '/parameters/bitrate_kbps',
      '/parameters/colour',
      '/parameters/duration_hours',
      '/parameters/max_listeners',
    ]);
  });

  test('refuses what cannot be quoted with the right status and code', async () => {
    assertErrorDocument(await quote({ product_id: 'no-such-product', parameters: {} }), 404, 'product_not_found');
    assertErrorDocument(await quote({ product_id: 'radio-directo', parameters: {} }), 422, 'product_not_quotable');
    assertErrorDocument(await quote({ product_id: 'temporary-audio', parameters: {} }), 409, 'product_planned');
    assertErrorDocument(await quote({ product_id: 'streaming-boost-relay', parameters: {} }), 409, 'pricing_pending');
    const noPackage = await quote({
      product_id: 'temporary-autodj',
      parameters: { duration_hours: 10, bitrate_kbps: 64, storage_mb: 50000 },
    });
    assertErrorDocument(noPackage, 422, 'no_package_covers');
    assert.equal(noPackage.body.error.details[0].pointer, '/parameters/storage_mb');
  });

  test('refuses malformed bodies with error documents, never a 500', async () => {
    assertErrorDocument(await quote({ ...instant, extra: 1 }), 422, 'invalid_request');
    assertErrorDocument(await quote({ parameters: {} }), 422, 'invalid_request');
    assertErrorDocument(await quote([instant]), 422, 'invalid_json');
    assertErrorDocument(
      await request(service, 'POST', '/quotes', {
        rawBody: '{"product_id": ',
        headers: { 'content-type': 'application/json' },
      }),
      422,
      'invalid_json',
    );
    assertErrorDocument(
      await request(service, 'POST', '/quotes', {
        rawBody: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
        headers: { 'content-type': 'application/json' },
      }),
      422,
      'invalid_json',
    );
    assertErrorDocument(
      await request(service, 'POST', '/quotes', {
        rawBody: 'product_id=instant-stream',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'unsupported_media_type',
    );
    assertErrorDocument(
      await request(service, 'POST', '/quotes', {
        rawBody: JSON.stringify({ ...instant, pad: 'x'.repeat(1024 * 1024) }),
        headers: { 'content-type': 'application/json' },
      }),
      413,
      'body_too_large',
    );
    assertErrorDocument(
      await quote({ product_id: 'instant-stream', parameters: { __proto__: { admin: true }, constructor: {} } }),
      422,
      'invalid_parameters',
    );
    assertErrorDocument(
      await quote({
        product_id: 'instant-stream',
        parameters: { duration_hours: 1e308, max_listeners: 1, bitrate_kbps: 16 },
      }),
      422,
      'invalid_parameters',
    );
    assertErrorDocument(await quote(instant, { 'idempotency-key': 'k'.repeat(256) }), 422, 'idempotency_key_invalid');
    assertErrorDocument(await quote(instant, { 'idempotency-key': 'clé' }), 422, 'idempotency_key_invalid');
    const spaced = await quote(instant, { 'idempotency-key': 'retry of order 7' });
    assert.equal(spaced.status, 200);
    assert.equal(spaced.body.idempotency.key, 'retry of order 7');
    const raw = (duration: string) =>
      request(service, 'POST', '/quotes', {
        rawBody: `{"product_id":"instant-stream","parameters":{"duration_hours":${duration},"max_listeners":1,"bitrate_kbps":16}}`,
        headers: { 'content-type': 'application/json' },
      });
    assertErrorDocument(await raw('1.0000000000000000001'), 422, 'number_not_exact');
    assertErrorDocument(await raw('1e400'), 422, 'number_not_exact');
    assert.equal((await raw('1.00000005')).body.quote.price.amount_atomic, '270001');
    assert.equal((await raw('2e0')).body.quote.price.amount_atomic, '290000');
  });

  test('one configuration quoted again: a quote and a record of its own each time, each replaying byte for byte; the answer kept only for an Idempotency-Key', async () => {
    const configuration = {
      product_id: 'instant-stream',
      parameters: { duration_hours: 5, max_listeners: 7, bitrate_kbps: 96 },
    };
    const key = `again-${Date.now()}`;
    const answers = [
      await quote(configuration),
      await quote(configuration),
      await quote(configuration, { 'idempotency-key': key }),
    ];
    const quotes = answers.map((a) => {
      assert.equal(a.status, 200, JSON.stringify(a.body));
      return a.body.quote;
    });
    assert.equal(new Set(quotes.map((q) => q.id)).size, 3);
    assert.equal(new Set(quotes.map((q) => q.audit.evaluation_id)).size, 3);
    for (const q of quotes) {
      assert.equal(q.price.amount_atomic, quotes[0].price.amount_atomic);
      assert.equal(Date.parse(q.expires_at_quote) - Date.parse(q.created_at), 300_000);
      const shown = JSON.parse((await service.cli(['audit', 'show', q.audit.evaluation_id])).stdout).record;
      assert.equal(shown.id, q.audit.evaluation_id);
      assert.equal(shown.evaluated_at, q.created_at);
      assert.deepEqual(shown.input, configuration);
    }
    // One replay of every record: a report line for each of the three evaluations, each identical.
    const replay = await service.cli(['audit', 'replay', '--all']);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    const reports = replayReports(replay.stdout);
    for (const q of quotes) {
      const report = reports.find((r) => r.id === q.audit.evaluation_id);
      assert.equal(report?.identical, true, `${q.audit.evaluation_id} replays identically: ${JSON.stringify(report)}`);
    }
    // The answer is the same text when the key is repeated, byte for byte.
    const first = await fetch(`${service.baseUrl}/quotes`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${service.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      },
      body: JSON.stringify(configuration),
    });
    assert.equal(first.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(
      await first.text(),
      JSON.stringify({ ok: true, quote: quotes[2], idempotency: { key, replayed: true } }),
    );

    await withDatabase(async (client) => {
      const { rows } = await client.query('SELECT id, response FROM quotes WHERE id = ANY($1)', [
        quotes.map((q) => q.id),
      ]);
      const stored = new Map(rows.map((r) => [r.id, r.response]));
      assert.equal(stored.get(quotes[0].id), null, 'a quote without an Idempotency-Key is never answered again');
      assert.equal(stored.get(quotes[1].id), null);
      assert.equal(stored.get(quotes[2].id), JSON.stringify(quotes[2]));
    });
  });

  test('Idempotency-Key: same body gives the same quote, a different body is refused', async () => {
    const key = `quote-${Date.now()}`;
    const first = await quote(instant, { 'idempotency-key': key });
    const again = await quote(instant, { 'idempotency-key': key });
    assert.equal(first.status, 200);
    assert.deepEqual(first.body.idempotency, { key, replayed: false });
    assert.deepEqual(again.body.idempotency, { key, replayed: true });
    assert.deepEqual(again.body.quote, first.body.quote);
    const other = await quote(
      { ...instant, parameters: { ...instant.parameters, duration_hours: 3 } },
      { 'idempotency-key': key },
    );
    assertErrorDocument(other, 409, 'idempotency_key_reused');
  });

  test('Idempotency-Key is scoped per API key and holds under concurrency', async () => {
    const created = await service.cli(['keys', 'create', '--name', 'second-agent']);
    assert.equal(created.code, 0, created.stderr);
    const second = { baseUrl: service.baseUrl, apiKey: JSON.parse(created.stdout).api_key as string };
    const key = `shared-${Date.now()}`;
    const mine = await quote(instant, { 'idempotency-key': key });
    const theirs = await request(second, 'POST', '/quotes', { body: instant, headers: { 'idempotency-key': key } });
    assert.equal(theirs.status, 200);
    assert.notEqual(theirs.body.quote.id, mine.body.quote.id);

    const racing = `race-${Date.now()}`;
    // Counted in the audit log's table (the CLI's audit list is tested in audit-trail.test.ts).
    const before = await auditRecordCount();
    const answers = await Promise.all(Array.from({ length: 20 }, () => quote(instant, { 'idempotency-key': racing })));
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]));
    assert.equal(new Set(answers.map((a) => a.body.quote.id)).size, 1);
    assert.equal(answers.filter((a) => !a.body.idempotency.replayed).length, 1);
    assert.equal((await auditRecordCount()) - before, 1, 'one evaluation recorded for one quote');
  });
});

describe('API keys', () => {
  test('a created key works, is listed without its secret, and a revoked key is refused at once', async () => {
    const created = JSON.parse((await service.cli(['keys', 'create', '--name', 'to-revoke'])).stdout);
    const agent = { baseUrl: service.baseUrl, apiKey: created.api_key as string };
    assert.equal((await request(agent, 'POST', '/quotes', { body: instant })).status, 200);
    const listed = await service.cli(['keys', 'list']);
    assert.ok(listed.stdout.includes(created.id));
    // The token is aak_<id>_<secret>, and the base64url secret may itself contain '_'.
    const secret = (created.api_key as string).slice(`aak_${created.id}_`.length);
    assert.equal(secret.length, 43);
    assert.ok(!listed.stdout.includes(secret), 'the secret is never shown again');
    const revoked = await service.cli(['keys', 'revoke', created.id]);
    assert.equal(revoked.code, 0);
    assertErrorDocument(await request(agent, 'POST', '/quotes', { body: instant }), 401, 'invalid_api_key');
  });
});

describe('hot reload and audit replay', () => {
  const file = () => join(catalog.catalogDir, 'products/temporary-autodj.yaml');
  const autodj = {
    product_id: 'temporary-autodj',
    parameters: { duration_hours: 10, bitrate_kbps: 64, storage_mb: 100 },
  };

  async function waitForHash(predicate: (hash: string, body: any) => boolean) {
    for (let i = 0; i < 100; i++) {
      const { body } = await get('/health');
      if (predicate(body.catalog.content_hash, body)) return body;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('the catalog was not reloaded in time');
  }

  test('an edited price takes effect without restart; older quotes still replay byte for byte', async () => {
    const old = await quote(autodj);
    assert.equal(old.body.quote.price.amount_atomic, '490000');
    const oldHash = (await get('/health')).body.catalog.content_hash;

    const original = await readFile(file(), 'utf8');
    await writeFile(file(), original.replace('amount_atomic: "490000"', 'amount_atomic: "510000"'));
    await waitForHash((h) => h !== oldHash);
    const fresh = await quote(autodj);
    assert.equal(fresh.body.quote.price.amount_atomic, '510000');
    assert.notEqual(fresh.body.quote.audit.catalog_hash, old.body.quote.audit.catalog_hash);

    // One replay of every record, the old quote's among them (replay of one ID: the audit verify test below).
    const all = await service.cli(['audit', 'replay', '--all']);
    assert.equal(all.code, 0, all.stdout);
    assert.match(all.stdout, /(\d+) replayed, \1 identical, 0 different/);
    const report = replayReports(all.stdout).find((r) => r.id === old.body.quote.audit.evaluation_id);
    assert.equal(report?.identical, true, JSON.stringify(report));
    assert.equal(report.replayed_output_hash, report.stored_output_hash);
  });

  test('an invalid edit keeps the last good catalog and reports file:line:column', async () => {
    const good = (await get('/health')).body.catalog.content_hash;
    const original = await readFile(file(), 'utf8');
    // writeFile empties the file before it writes: on a loaded machine a reload may first read (and reject) the empty
    // file, so the test waits for the rejection of what it wrote.
    const reported = /catalog\/products\/temporary-autodj\.yaml:\d+:\d+: must be one of/;
    await writeFile(file(), original.replace('bitrate_kbps: { type: integer', 'bitrate_kbps: { type: integr'));
    try {
      const health = await waitForHash((_, body) => body.catalog.reload_errors > 0 && reported.test(service.output()));
      assert.equal(health.catalog.content_hash, good);
      assert.equal((await quote(autodj)).status, 200);
    } finally {
      await writeFile(file(), original);
      await waitForHash((_, body) => body.catalog.reload_errors === 0);
    }
  });

  test('a product that is visible but not orderable is still quoted, with the reasons', async () => {
    const path = join(catalog.catalogDir, 'products/instant-stream.yaml');
    const original = await readFile(path, 'utf8');
    const oldHash = (await get('/health')).body.catalog.content_hash;
    await writeFile(
      path,
      original.replace('orderable: { human: false, agent: true }', 'orderable: { human: false, agent: false }'),
    );
    try {
      await waitForHash((h) => h !== oldHash);
      const { status, body } = await quote(instant);
      assert.equal(status, 200);
      assert.equal(body.quote.agent_orderable, false);
      assert.deepEqual(
        body.quote.agent_orderable_reasons.map((r: any) => r.code),
        ['not_agent_orderable'],
      );
      const availability = (await get('/availability')).body.products.find(
        (p: any) => p.product_id === 'instant-stream',
      );
      assert.equal(availability.available_now, false);
      assert.match(availability.reason, /not open/);
    } finally {
      await writeFile(path, original);
      await waitForHash((h) => h === oldHash);
    }
  });

  test('audit records show what was evaluated, and verify detects an edited or deleted record', async () => {
    const { body } = await quote(instant);
    const shown = await service.cli(['audit', 'show', body.quote.audit.evaluation_id]);
    const record = JSON.parse(shown.stdout).record;
    assert.equal(record.kind, 'quote_price');
    assert.deepEqual(record.input, instant);
    assert.equal(record.output.total_atomic, body.quote.price.amount_atomic);
    assert.ok(record.trace.some((t: any) => t.rule === 'formula-duration' && t.result === true));
    assert.equal(record.facts.product_id, 'instant-stream');
    assert.equal(record.facts.product, undefined, 'the product is in the snapshot, not repeated in every record');
    assert.equal(record.snapshot_hash, body.quote.audit.catalog_hash);
    assert.ok(record.versions['json-rules-engine']);

    const intact = await service.cli(['audit', 'verify']);
    assert.equal(intact.code, 0, intact.stderr);
    assert.match(intact.stdout, /the chain is intact/);

    await withDatabase(async (client) => {
      const id = body.quote.audit.evaluation_id;
      const {
        rows: [stored],
      } = await client.query('SELECT record FROM audit_records WHERE id = $1', [id]);
      const tampered = stored.record.replace('"total_atomic":"290000"', '"total_atomic":"1"');
      assert.notEqual(tampered, stored.record);
      await client.query('UPDATE audit_records SET record = $2 WHERE id = $1', [id, tampered]);
      const edited = await service.cli(['audit', 'verify']);
      assert.equal(edited.code, 1);
      assert.match(edited.stderr, /was edited/);
      const replay = await service.cli(['audit', 'replay', id]);
      assert.equal(replay.code, 1, 'a tampered record no longer replays identically');

      await client.query('UPDATE audit_records SET record = $2 WHERE id = $1', [id, stored.record]);
      assert.equal((await service.cli(['audit', 'verify'])).code, 0, 'restored');

      await client.query(
        'DELETE FROM quotes WHERE evaluation_id = (SELECT id FROM audit_records ORDER BY seq DESC LIMIT 1)',
      );
      await client.query('DELETE FROM audit_records WHERE seq = (SELECT max(seq) FROM audit_records)');
      const deleted = await service.cli(['audit', 'verify']);
      assert.equal(deleted.code, 1);
      assert.match(deleted.stderr, /deleted/);
    });
  });
});

describe('limits', () => {
  test('headers too large get an error document, not a bare status line', async () => {
    const { request: raw } = await import('node:http');
    const url = new URL(service.baseUrl);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = raw(
        { host: url.hostname, port: url.port, path: '/api/v1/products', headers: { 'x-big': 'a'.repeat(20_000) } },
        (res) => {
          let body = '';
          res.on('data', (d) => {
            body += d;
          });
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    assert.equal(answer.status, 431);
    const doc = JSON.parse(answer.body);
    assert.equal(doc.ok, false);
    assert.equal(doc.error.code, 'headers_too_large');
  });

  test('a client that sends its headers too slowly gets a 408 error document', { timeout: 30_000 }, async () => {
    const { connect } = await import('node:net');
    const url = new URL(service.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    socket.write('GET /api/v1/products HTTP/1.1\r\nHost: x\r\n');
    const started = Date.now();
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (d) => {
        text += d;
      });
      socket.on('close', () => resolve(text));
    });
    assert.match(answer, /^HTTP\/1\.1 408/);
    assert.equal(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).error.code, 'request_timeout');
    assert.ok(Date.now() - started < 20_000);
  });

  // A service of its own with a small rate, so that a slow machine cannot refill the bucket while the burst is sent:
  // 60 requests against 2/s with a burst of 4 stay limited unless sending them takes more than 28 s.
  // It shares the first service's database and chain (an instance of its own, not a second PostgreSQL and anvil).
  test('an API key past its rate gets 429 with Retry-After', async () => {
    const lock = await serveLock(service);
    const dev = await devFile(service);
    const slow = await startService({
      RATE_LIMIT_PER_KEY: '2',
      RATE_LIMIT_PER_IP: '0',
      DATABASE_URL: lock.database_url,
      CHAIN_RPC_URL: dev.chain.rpc_url,
      DEV_FACILITATOR_ACCOUNT: '5',
    });
    const answers = await Promise.all(
      Array.from({ length: 60 }, () => request(slow, 'POST', '/quotes', { body: { product_id: 'no-such-product' } })),
    ).finally(() => slow.stop());
    const limited = answers.filter((a) => a.status === 429);
    assert.ok(limited.length >= 40, `most requests are limited (${limited.length} of 60)`);
    assert.ok(answers.filter((a) => a.status === 404).length >= 4, 'the burst allowance passes');
    assert.equal(limited[0].body.error.code, 'rate_limited');
    assert.equal(limited[0].body.error.retryable, true);
    assert.ok(Number(limited[0].headers.get('retry-after')) >= 1);
  });
});
