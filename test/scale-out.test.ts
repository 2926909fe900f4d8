import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { connectListener, startFfmpegSource, waitFor } from './support/streaming.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

requireStreamingTools();
const running: Service[] = [];
after(async () => {
  for (const s of running.reverse()) await s.stop();
});

test('three instances on one PostgreSQL behave as one: 50 identical paid requests settle once, revocation acts everywhere', async () => {
  const first = await startService();
  running.push(first);
  const lock = await serveLock(first);
  const dev = await devFile(first);
  const second = await startService({
    DATABASE_URL: lock.database_url,
    CHAIN_RPC_URL: dev.chain.rpc_url,
    DEV_FACILITATOR_ACCOUNT: '4',
  });
  running.push(second);
  const third = await startService({
    DATABASE_URL: lock.database_url,
    CHAIN_RPC_URL: dev.chain.rpc_url,
    DEV_FACILITATOR_ACCOUNT: '7',
  });
  running.push(third);
  const instances = [first, second, third];

  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const body = {
    product_id: 'event-stream',
    email: 'agent@example.com',
    station_name: 'Two FM',
    parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 96 },
  };
  const key = `two-instances-${Date.now()}`;
  const ask = await request(first, 'POST', '/orders', { body, headers: { 'idempotency-key': key } });
  const header = ask.headers.get('payment-required')!;
  const { asset, payTo, amount } = decodePaymentRequiredHeader(header).accepts[0];
  assert.equal(amount, '310000');
  const signature = await wallet.pay(header);
  const sellerBefore = await wallet.balanceOf(asset, payTo);

  const answers = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      request({ baseUrl: instances[i % 3].baseUrl, apiKey: first.apiKey }, 'POST', '/orders', {
        body,
        headers: { 'idempotency-key': key, 'payment-signature': signature },
      }),
    ),
  );
  const ok = answers.filter((a) => a.status === 200);
  const unexpected = answers.filter((a) => a.status !== 200 && a.body.error?.code !== 'idempotency_in_progress');
  assert.deepEqual(
    unexpected.map((a) => a.body),
    [],
  );
  assert.ok(ok.length >= 1);
  assert.equal(new Set(ok.map((a) => a.body.service.service_id)).size, 1, 'one service');
  assert.equal(new Set(ok.map((a) => a.body.order.id)).size, 1, 'one order');
  assert.equal(ok.filter((a) => !a.body.idempotent_replay).length, 1);
  assert.equal((await wallet.balanceOf(asset, payTo)) - sellerBefore, 310000n, 'one settlement');

  for (const instance of instances) {
    const seen = await request(
      { baseUrl: instance.baseUrl, apiKey: first.apiKey },
      'GET',
      `/orders/${ok[0].body.order.id}`,
    );
    assert.equal(seen.status, 200);
  }

  // Bought through the third instance: its Icecast asks the third instance, which decides from the shared database.
  const bought = await buy({ baseUrl: third.baseUrl, apiKey: first.apiKey }, wallet, {
    ...body,
    station_name: 'Third FM',
    parameters: { ...body.parameters, max_listeners: 1 },
  });
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  const encoder = startFfmpegSource(bought.body.service.broadcast_url);
  try {
    const listener = await waitFor(
      'the mount on the third instance',
      async () => {
        const l = await connectListener(bought.body.service.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      20_000,
    );
    const second = await connectListener(bought.body.service.stream_url);
    assert.notEqual(second.status, 200, 'max_listeners 1 holds');
    listener.close();
    second.close();
  } finally {
    encoder.kill('SIGKILL');
  }

  // A key used on every instance (so each has it verified), revoked through one: refused at once by all three.
  const created = JSON.parse((await first.cli(['keys', 'create', '--name', 'roaming'])).stdout);
  const quote = { product_id: 'instant-stream', parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 16 } };
  for (const instance of instances)
    assert.equal(
      (await request({ baseUrl: instance.baseUrl, apiKey: created.api_key }, 'POST', '/quotes', { body: quote }))
        .status,
      200,
    );
  // It also bought an order, and replayed that order on every instance (so each has seen key and order).
  const roamingBody = { ...body, station_name: 'Roaming FM' };
  const roamingAsk = await request({ baseUrl: first.baseUrl, apiKey: created.api_key }, 'POST', '/orders', {
    body: roamingBody,
    headers: { 'idempotency-key': 'roaming' },
  });
  const roamingPaid = {
    'idempotency-key': 'roaming',
    'payment-signature': await wallet.pay(roamingAsk.headers.get('payment-required')!),
  };
  assert.equal(
    (
      await request({ baseUrl: first.baseUrl, apiKey: created.api_key }, 'POST', '/orders', {
        body: roamingBody,
        headers: roamingPaid,
      })
    ).status,
    200,
  );
  for (const instance of instances)
    assert.equal(
      (
        await request({ baseUrl: instance.baseUrl, apiKey: created.api_key }, 'POST', '/orders', {
          body: roamingBody,
          headers: roamingPaid,
        })
      ).status,
      200,
    );
  assert.equal((await third.cli(['keys', 'revoke', created.id])).code, 0);
  for (const instance of instances) {
    const replay = await request({ baseUrl: instance.baseUrl, apiKey: created.api_key }, 'POST', '/orders', {
      body: roamingBody,
      headers: roamingPaid,
    });
    assert.equal(
      replay.status,
      401,
      `a revoked key's idempotent replay hands out no credentials (${instance.baseUrl})`,
    );
    assert.equal(replay.body.service, undefined);
    const unpaid = await request({ baseUrl: instance.baseUrl, apiKey: created.api_key }, 'POST', '/orders', {
      body: roamingBody,
      headers: { 'idempotency-key': 'roaming-2' },
    });
    assert.equal(unpaid.status, 401, `an unpaid order with a revoked key gets 401, not 402 (${instance.baseUrl})`);
    const refused = await request({ baseUrl: instance.baseUrl, apiKey: created.api_key }, 'POST', '/quotes', {
      body: quote,
    });
    assert.equal(refused.status, 401, instance.baseUrl);
    assert.equal(
      (await request({ baseUrl: instance.baseUrl, apiKey: created.api_key }, 'GET', `/orders/${ok[0].body.order.id}`))
        .status,
      401,
    );
  }
});
