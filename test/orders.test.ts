import assert from 'node:assert/strict';
import { type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request, root, runNode, startService, type JsonResponse, type Service } from './support/service.js';
import { buy } from './support/purchase.js';
import {
  connectListener,
  exitOf,
  hasMpegFrame,
  startFfmpegSource,
  waitFor,
  type Listener,
} from './support/streaming.js';
import { DEV_ACCOUNTS } from '../src/chain/index.js';
import { KeyRevoked } from '../src/keys/index.js';
import { OrderStore } from '../src/orders/index.js';
import { Database } from '../src/store/index.js';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile, type DevFile } from './support/dev-file.js';
import { connectDatabase, serveLock } from './support/serve-lock.js';

requireStreamingTools();

let service: Service;
let wallet: TestWallet;
let dev: DevFile;
const processes: ChildProcess[] = [];
const listeners: Listener[] = [];

before(async () => {
  service = await startService();
  dev = await devFile(service);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
});
after(async () => {
  for (const l of listeners) l.close();
  for (const p of processes) p.kill('SIGKILL');
  await service?.stop();
});

const order = (overrides: Record<string, unknown> = {}) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Test FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
  ...overrides,
});
let keyCounter = 0;
const newKey = () => `order-${process.pid}-${Date.now()}-${keyCounter++}`;

function post(body: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return request(service, 'POST', '/orders', { body, headers });
}

function assertError(response: JsonResponse, status: number, code: string) {
  assert.equal(response.status, status, JSON.stringify(response.body));
  assert.equal(response.body.ok, false);
  assert.equal(response.body.error.code, code);
  assert.equal(typeof response.body.error.retryable, 'boolean');
  assert.ok(response.body.error.request_id);
}

const paidOrder = (body: Record<string, unknown>, key: string, sent: string[] = []) =>
  buy(service, wallet, body, key, sent);

describe('POST /orders without payment', () => {
  test('answers 402 with x402 v2 PAYMENT-REQUIRED and binds nothing', async () => {
    const key = newKey();
    const response = await post(order(), { 'idempotency-key': key });
    assertError(response, 402, 'payment_required');
    const required = decodePaymentRequiredHeader(response.headers.get('payment-required')!);
    assert.equal(required.x402Version, 2);
    assert.match(required.resource.url, /\/api\/v1\/orders$/);
    assert.equal(required.resource.mimeType, 'application/json');
    assert.equal(required.accepts.length, 1);
    const [accept] = required.accepts;
    assert.equal(accept.scheme, 'exact');
    assert.equal(accept.network, 'eip155:8453');
    assert.equal(accept.amount, '270000');
    assert.equal(accept.asset, '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913');
    assert.match(accept.payTo, /^0x[0-9a-fA-F]{40}$/);
    assert.ok(accept.maxTimeoutSeconds > 0);
    assert.deepEqual(accept.extra, { name: 'USD Coin', version: '2' });

    const other = await post(order({ parameters: { duration_hours: 2, max_listeners: 2, bitrate_kbps: 64 } }), {
      'idempotency-key': key,
    });
    assertError(other, 402, 'payment_required');
    assert.equal(
      decodePaymentRequiredHeader(other.headers.get('payment-required')!).accepts[0].amount,
      '290000',
      'the key was not bound by the first 402',
    );
  });

  test('validates the request before asking for money', async () => {
    assertError(await post(order()), 400, 'idempotency_key_missing');
    assertError(await post(order(), { 'idempotency-key': '' }), 400, 'idempotency_key_missing');
    const invalid = await post(
      order({
        email: 'not-an-email',
        quantity: 2,
        station_name: 'x'.repeat(121),
        metadata: { note: 'y'.repeat(201) },
        extra: true,
      }),
      { 'idempotency-key': newKey() },
    );
    assertError(invalid, 422, 'invalid_request');
    assert.deepEqual(invalid.body.error.details.map((d: any) => d.pointer).sort(), [
      '/email',
      '/extra',
      '/metadata/note',
      '/quantity',
      '/station_name',
    ]);
    assertError(
      await request(service, 'POST', '/orders', {
        body: order(),
        auth: false,
        headers: { 'idempotency-key': newKey() },
      }),
      401,
      'authentication_required',
    );
    assertError(
      await post(order({ product_id: 'no-such-thing' }), { 'idempotency-key': newKey() }),
      404,
      'product_not_found',
    );
    assertError(
      await post(order({ product_id: 'radio-local', parameters: {}, billing: 'monthly' }), {
        'idempotency-key': newKey(),
      }),
      409,
      'product_not_orderable',
    );
    assertError(
      await post(order({ product_id: 'radio-directo', parameters: {}, billing: 'annual' }), {
        'idempotency-key': newKey(),
      }),
      409,
      'amount_out_of_range',
    );
    assertError(
      await post(order({ billing: 'monthly' }), { 'idempotency-key': newKey() }),
      422,
      'billing_not_supported',
    );
    const withoutBilling = await post(order({ product_id: 'radio-directo', parameters: {} }), {
      'idempotency-key': newKey(),
    });
    assertError(withoutBilling, 422, 'billing_not_supported');
    assert.equal(withoutBilling.body.error.details[0].pointer, '/billing');
    const monthly = await post(order({ product_id: 'radio-directo', parameters: {}, billing: 'monthly' }), {
      'idempotency-key': newKey(),
    });
    assertError(monthly, 402, 'payment_required');
    assert.equal(decodePaymentRequiredHeader(monthly.headers.get('payment-required')!).accepts[0].amount, '7452000');
  });

  test('a live quote locks its price; an expired or mismatched one is refused', async () => {
    const q = await request(service, 'POST', '/quotes', {
      body: { product_id: 'instant-stream', parameters: { duration_hours: 1.5, max_listeners: 2, bitrate_kbps: 64 } },
    });
    const locked = await post(
      order({
        parameters: { duration_hours: 1.5, max_listeners: 2, bitrate_kbps: 64 },
        metadata: { quote_id: q.body.quote.id },
      }),
      { 'idempotency-key': newKey() },
    );
    assertError(locked, 402, 'payment_required');
    assert.equal(
      decodePaymentRequiredHeader(locked.headers.get('payment-required')!).accepts[0].amount,
      q.body.quote.price.amount_atomic,
    );
    assertError(
      await post(order({ metadata: { quote_id: q.body.quote.id } }), { 'idempotency-key': newKey() }),
      409,
      'quote_mismatch',
    );
    assertError(
      await post(order({ metadata: { quote_id: 'qt_unknown' } }), { 'idempotency-key': newKey() }),
      422,
      'quote_not_found',
    );

    const db = await connectDatabase(service);
    try {
      await db.query("UPDATE quotes SET expires_at = now() - interval '1 second' WHERE id = $1", [q.body.quote.id]);
    } finally {
      await db.end();
    }
    const expired = await post(
      order({
        parameters: { duration_hours: 1.5, max_listeners: 2, bitrate_kbps: 64 },
        metadata: { quote_id: q.body.quote.id },
      }),
      { 'idempotency-key': newKey() },
    );
    assertError(expired, 409, 'quote_expired');
  });
});

describe('a paid order', () => {
  let paid: Awaited<ReturnType<typeof paidOrder>>;
  let key: string;
  const signatures: string[] = [];

  test('pays with @x402/fetch, moves exactly the price on chain and returns a live service', async () => {
    const required = decodePaymentRequiredHeader(
      (await post(order(), { 'idempotency-key': newKey() })).headers.get('payment-required')!,
    );
    const { asset, payTo } = required.accepts[0];
    const buyerBefore = await wallet.balanceOf(asset, dev.buyer.address);
    const sellerBefore = await wallet.balanceOf(asset, payTo);

    key = newKey();
    paid = await paidOrder(order(), key, signatures);
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(paid.body.ok, true);
    assert.equal(paid.body.idempotent_replay, false);
    assert.match(paid.body.order.id, /^ra_[a-zA-Z0-9_-]{8,120}$/);
    assert.equal(paid.body.order.status, 'active');
    const svc = paid.body.service;
    assert.deepEqual(Object.keys(svc).sort(), [
      'broadcast_url',
      'endpoints',
      'expires_at',
      'limits',
      'service_id',
      'status',
      'stream_url',
    ]);
    assert.match(svc.service_id, /^[a-zA-Z0-9_-]{8,120}$/);
    assert.equal(svc.status, 'active');
    assert.match(svc.stream_url, /^http:\/\/127\.0\.0\.1:\d+\/live-/);
    assert.match(svc.broadcast_url, /^icecast:\/\/source:[^@]+@127\.0\.0\.1:\d+\/live-/);
    assert.deepEqual(svc.limits, { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64, transfer_gb: 0 });
    const hours = (Date.parse(svc.expires_at) - Date.parse(paid.body.order.settled_at)) / 3_600_000;
    assert.equal(hours, 1);

    const settlement = decodePaymentResponseHeader(paid.headers.get('payment-response')!);
    assert.equal(settlement.success, true);
    assert.match(settlement.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(settlement.network, 'eip155:8453');
    assert.equal(settlement.payer?.toLowerCase(), dev.buyer.address.toLowerCase());

    assert.equal(buyerBefore - (await wallet.balanceOf(asset, dev.buyer.address)), 270000n);
    assert.equal((await wallet.balanceOf(asset, payTo)) - sellerBefore, 270000n);

    const fetched = await request(service, 'GET', `/orders/${paid.body.order.id}`);
    assert.equal(fetched.body.order.id, paid.body.order.id);
    assert.deepEqual(fetched.body.service, svc);
    const own = await request(service, 'GET', `/services/${svc.service_id}`);
    assert.deepEqual(own.body.service, svc);
  });

  test('a repeat returns the same order without paying again; another body with the key is refused', async () => {
    const required = decodePaymentRequiredHeader(
      (await post(order(), { 'idempotency-key': newKey() })).headers.get('payment-required')!,
    );
    const before = await wallet.balanceOf(required.accepts[0].asset, dev.buyer.address);
    const again = await post(order(), { 'idempotency-key': key });
    assert.equal(again.status, 200);
    assert.equal(again.body.idempotent_replay, true);
    assert.equal(again.body.order.id, paid.body.order.id);
    assert.deepEqual(again.body.service, paid.body.service);
    assert.equal(again.headers.get('payment-response'), paid.headers.get('payment-response'));
    assert.equal(await wallet.balanceOf(required.accepts[0].asset, dev.buyer.address), before);
    assertError(
      await post(order({ station_name: 'Other FM' }), { 'idempotency-key': key }),
      409,
      'idempotency_key_reused',
    );
  });

  test('Idempotency-Key look-ups made in one turn go to PostgreSQL as one statement and each gets its own answer', async () => {
    const created = JSON.parse((await service.cli(['keys', 'create', '--name', 'revoked-in-a-batch'])).stdout);
    assert.equal((await service.cli(['keys', 'revoke', created.id])).code, 0);
    const lock = await serveLock(service);
    const db = new Database(lock.database_url, { max: 2 });
    try {
      const statements: string[] = [];
      const query = db.query.bind(db);
      db.query = ((sql: string, params?: unknown[]) => {
        statements.push(sql);
        return query(sql, params);
      }) as typeof db.query;
      const store = new OrderStore(db);
      const devKeyId = dev.api_key.split('_')[1];
      const asked = [
        ...Array.from({ length: 5 }, () => ({ apiKeyId: devKeyId, idempotencyKey: newKey() })),
        { apiKeyId: devKeyId, idempotencyKey: key },
        { apiKeyId: created.id, idempotencyKey: key },
        { apiKeyId: 'no-such-key', idempotencyKey: key },
        ...Array.from({ length: 5 }, () => ({ apiKeyId: devKeyId, idempotencyKey: newKey() })),
      ];
      const answers = await Promise.allSettled(asked.map((a) => store.byKey(a.apiKeyId, a.idempotencyKey)));
      assert.equal(
        statements.length,
        2,
        `one statement looks up the ${asked.length} keys, one reads the order found whole`,
      );
      answers.forEach((answer, i) => {
        if (i === 5) assert.equal(answer.status === 'fulfilled' && answer.value?.id, paid.body.order.id);
        else if (i === 6 || i === 7)
          assert.equal(answer.status === 'rejected' && answer.reason instanceof KeyRevoked, true, `look-up ${i}`);
        else assert.deepEqual(answer, { status: 'fulfilled', value: undefined }, `look-up ${i}`);
      });
    } finally {
      await db.close();
    }
  });

  test('one payment authorization pays for one order only', async () => {
    assert.equal(signatures.length, 1);
    const reused = await post(order(), { 'idempotency-key': newKey(), 'payment-signature': signatures[0] });
    assertError(reused, 409, 'payment_already_used');
  });

  test('tampered, foreign and malformed payments get a fresh 402 and nothing is provisioned', async () => {
    const ask = await post(order(), { 'idempotency-key': newKey() });
    const header = ask.headers.get('payment-required')!;
    const attempts: [string, (p: any) => void][] = [
      [
        'amount',
        (p) => {
          p.accepted.amount = '1';
        },
      ],
      [
        'payTo',
        (p) => {
          p.accepted.payTo = dev.buyer.address;
        },
      ],
      [
        'network',
        (p) => {
          p.accepted.network = 'eip155:1';
        },
      ],
      [
        'asset',
        (p) => {
          p.accepted.asset = '0x0000000000000000000000000000000000000001';
        },
      ],
      [
        'signed value',
        (p) => {
          p.payload.authorization.value = '1';
        },
      ],
      [
        'signature',
        (p) => {
          p.payload.signature = p.payload.signature.slice(0, -4) + '0000';
        },
      ],
    ];
    for (const [what, tamper] of attempts) {
      const response = await post(order(), {
        'idempotency-key': newKey(),
        'payment-signature': await wallet.pay(header, tamper),
      });
      assert.equal(response.status, 402, `${what}: ${JSON.stringify(response.body)}`);
      assert.ok(['payment_mismatch', 'payment_rejected'].includes(response.body.error.code), what);
      assert.ok(response.headers.get('payment-required'), `${what}: a fresh PAYMENT-REQUIRED`);
    }
    for (const garbage of [
      'not base64!',
      Buffer.from('{"x402Version":2}').toString('base64'),
      Buffer.from('[]').toString('base64'),
    ]) {
      assertError(
        await post(order(), { 'idempotency-key': newKey(), 'payment-signature': garbage }),
        402,
        'payment_invalid',
      );
    }
    const now = BigInt(Math.floor(Date.now() / 1000));
    const expired = await post(order(), {
      'idempotency-key': newKey(),
      'payment-signature': await wallet.payWithValidity(header, 0n, now - 60n),
    });
    assertError(expired, 402, 'payment_rejected');
    const notYetValid = await post(order(), {
      'idempotency-key': newKey(),
      'payment-signature': await wallet.payWithValidity(header, now + 3600n, now + 7200n),
    });
    assertError(notYetValid, 402, 'payment_rejected');
    const broke = new TestWallet(DEV_ACCOUNTS[5].privateKey, dev.chain.rpc_url);
    const underFunded = await post(order(), {
      'idempotency-key': newKey(),
      'payment-signature': await broke.pay(header),
    });
    assertError(underFunded, 402, 'payment_rejected');
    assert.match(underFunded.body.error.message, /insufficient/i);
    const dearer = await post(order({ parameters: { duration_hours: 5, max_listeners: 2, bitrate_kbps: 64 } }), {
      'idempotency-key': newKey(),
      'payment-signature': await wallet.pay(header),
    });
    assertError(dearer, 402, 'payment_mismatch');

    // None of the refused attempts bound its key or provisioned anything: the key still takes a good payment.
    const retryKey = newKey();
    assertError(
      await post(order(), { 'idempotency-key': retryKey, 'payment-signature': await broke.pay(header) }),
      402,
      'payment_rejected',
    );
    const good = await post(order(), { 'idempotency-key': retryKey, 'payment-signature': await wallet.pay(header) });
    assert.equal(good.status, 200);
    assert.equal(good.body.idempotent_replay, false);
  });

  test('50 identical paid requests at once settle once and create one service', async () => {
    const body = order({ station_name: 'Race FM' });
    const raceKey = newKey();
    const header = (await post(body, { 'idempotency-key': raceKey })).headers.get('payment-required')!;
    const signature = await wallet.pay(header);
    const asset = decodePaymentRequiredHeader(header).accepts[0].asset;
    const before = await wallet.balanceOf(asset, dev.buyer.address);
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => post(body, { 'idempotency-key': raceKey, 'payment-signature': signature })),
    );
    const ok = answers.filter((a) => a.status === 200);
    const busy = answers.filter((a) => a.status === 409 && a.body.error.code === 'idempotency_in_progress');
    assert.equal(
      ok.length + busy.length,
      50,
      JSON.stringify(answers.filter((a) => a.status !== 200 && a.status !== 409).map((a) => a.body)),
    );
    assert.ok(ok.length >= 1);
    assert.equal(new Set(ok.map((a) => a.body.service.service_id)).size, 1);
    assert.equal(ok.filter((a) => !a.body.idempotent_replay).length, 1);
    for (const b of busy) assert.equal(b.body.error.retryable, true);
    assert.equal(before - (await wallet.balanceOf(asset, dev.buyer.address)), 270000n, 'charged exactly once');
  });
});

test('npm run demo buys a 1-hour instant-stream with the official x402 client', async () => {
  const demo = await runNode(['--import', 'tsx', join(root, 'scripts/demo.ts')], { DATA_DIR: service.dataDir });
  assert.equal(demo.code, 0, demo.stderr);
  assert.match(demo.stdout, /^order {6}ra_\S+ paid 0\.27 USDC \(transaction 0x[0-9a-f]{64}\)$/m);
  assert.match(demo.stdout, /^listen {5}http:\/\/127\.0\.0\.1:\d+\/live-/m);
  assert.match(demo.stdout, /^broadcast {2}icecast:\/\/source:/m);
});

test('logs carry request and order ids, never secrets; /metrics counts what happened', async () => {
  const { body } = await paidOrder(order({ station_name: 'Logged FM' }), newKey());
  // The logger writes asynchronously: its lines may reach the pipe just after the answer.
  const logs = await waitFor('the order id in the logs', () => {
    const output = service.output();
    return output.includes(`"order_id":"${body.order.id}"`) && output;
  });
  assert.match(logs, /"request_id":"req_/);
  const password = new URL(body.service.broadcast_url.replace(/^icecast:/, 'http:')).password;
  for (const secret of [service.apiKey, dev.buyer.private_key, dev.buyer.private_key.slice(2), password])
    assert.ok(!logs.includes(secret), 'a secret reached the logs');
  const metrics = await (await fetch(service.metricsUrl)).text();
  assert.match(metrics, /^http_requests_total\{route="\/api\/v1\/orders",method="POST",status="200"\} [1-9]/m);
  assert.match(metrics, /^settlements_total\{result="settled"\} [1-9]/m);
  assert.match(metrics, /^orders\{state="active"\} [1-9]/m);
  assert.match(metrics, /^services\{status="active"\} [1-9]/m);
});

describe('the bought stream', () => {
  test('accepts its own source only, serves listeners up to max_listeners', async () => {
    const { body } = await paidOrder(order({ station_name: 'Live FM' }), newKey());
    const { broadcast_url: broadcast, stream_url: stream } = body.service;

    const wrong = startFfmpegSource(broadcast.replace(/:[^:@/]+@/, ':wrong-password@'));
    processes.push(wrong);
    assert.notEqual(await exitOf(wrong, 15_000), 0, 'a wrong source password is refused');

    const source = startFfmpegSource(broadcast);
    processes.push(source);
    const first = await waitFor(
      'the mount to go live',
      async () => {
        const l = await connectListener(stream).catch(() => undefined);
        if (l && l.status === 200) return l;
        l?.close();
        return undefined;
      },
      20_000,
    );
    listeners.push(first);
    const second = await connectListener(stream);
    listeners.push(second);
    assert.equal(second.status, 200);
    await waitFor(
      'audio for both listeners',
      () => hasMpegFrame(first.received()) && hasMpegFrame(second.received()),
      10_000,
    );

    const third = await connectListener(stream);
    listeners.push(third);
    assert.notEqual(third.status, 200, 'the listener beyond max_listeners is refused');
  });
});
