import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  copyCatalog,
  request,
  startService,
  withoutCapacityReserve,
  type JsonResponse,
  type Service,
} from './support/service.js';
import { buy } from './support/purchase.js';
import { shortLivedCatalog } from './support/short-catalog.js';
import { waitFor } from './support/streaming.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile, buyerWallet } from './support/dev-file.js';

// A deployment whose Icecast carries 2 streams and 25 listeners: no stream or listener place is sold beyond that.
let service: Service;
let wallet: TestWallet;
let buyer: string;

let catalog: Awaited<ReturnType<typeof copyCatalog>>;

// The capacity reserve would keep part of this small host for paid history (test/sybil.test.ts): out here.
before(async () => {
  catalog = await copyCatalog();
  await withoutCapacityReserve(catalog.catalogDir);
  service = await startService({
    ICECAST_MAX_SOURCES: '2',
    ICECAST_MAX_LISTENERS: '25',
    CATALOG_DIR: catalog.catalogDir,
    RULES_DIR: catalog.rulesDir,
  });
  const dev = await devFile(service);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  buyer = dev.buyer.address;
});
after(async () => {
  await service?.stop();
  await catalog?.remove();
});

const order = (maxListeners: number) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Capacity FM',
  parameters: { duration_hours: 1, max_listeners: maxListeners, bitrate_kbps: 64 },
});
let keys = 0;
const newKey = () => `capacity-${process.pid}-${keys++}`;
const post = (body: unknown, key: string, signature?: string) =>
  request(service, 'POST', '/orders', {
    body,
    headers: { 'idempotency-key': key, ...(signature && { 'payment-signature': signature }) },
  });

/** A refusal before payment; Retry-After says when the first stream anywhere ends (`endsAt`, else within the hour). */
function assertExhausted(response: JsonResponse, pattern: RegExp, endsAt?: number) {
  assert.equal(response.status, 503, JSON.stringify(response.body));
  assert.equal(response.body.error.code, 'capacity_exhausted');
  assert.equal(response.body.error.retryable, true);
  assert.match(response.body.error.message, pattern);
  assert.match(response.body.error.message, /Nothing was charged/);
  const retryAfter = Number(response.headers.get('retry-after'));
  const latest = endsAt === undefined ? 3600 : Math.max(1, Math.ceil((endsAt - Date.now()) / 1000) + 1);
  assert.ok(retryAfter >= 1 && retryAfter <= latest, `Retry-After ${retryAfter}, the first stream ends in ${latest} s`);
  if (endsAt === undefined) assert.ok(retryAfter > 3000, `Retry-After ${retryAfter}: these streams run for an hour`);
  assert.equal(response.headers.get('payment-required'), null, 'no payment is asked for what cannot be delivered');
}

describe('stream capacity', () => {
  test('Icecast is configured with the same limits', async () => {
    const config = await readFile(join(service.dataDir, 'icecast', 'icecast.xml'), 'utf8');
    assert.match(config, /<sources>2<\/sources>/);
    assert.match(config, /<clients>77<\/clients>/);
  });

  const availability = async (query = '') => {
    const answer = await request(service, 'GET', `/availability${query}`, { auth: false });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    return { ...answer.body, instant: answer.body.products.find((p: any) => p.product_id === 'instant-stream') };
  };
  /** /availability once its count (which may be up to a second old) shows `settled`, or after 5 s as it is. */
  const availabilityWhen = async (query: string, settled: (a: any) => boolean) => {
    let answer = await availability(query);
    for (let i = 0; i < 50 && !settled(answer); i++) {
      await new Promise((r) => setTimeout(r, 100));
      answer = await availability(query);
    }
    return answer;
  };

  test('listener places: an order that would overbook them is refused before payment, a smaller one fits', async () => {
    assert.equal((await availability('?listeners=20')).instant.available_now, true);
    assert.equal((await buy(service, wallet, order(20), newKey())).status, 200);
    // /availability says what an order would meet: 5 places left.
    const after = await availabilityWhen('?listeners=10', (a) => a.capacity.listener_places.free === 5);
    assert.deepEqual(after.capacity.listener_places, { total: 25, free: 5 });
    assert.equal(after.instant.available_now, false);
    assert.match(after.instant.reason, /5 listener places free, fewer than the 10 asked/);
    assert.equal((await availability('?listeners=2')).instant.available_now, true);
    assert.equal(
      (await request(service, 'GET', '/availability?listeners=many', { auth: false })).body.error.code,
      'invalid_query',
    );
    assertExhausted(await post(order(10), newKey()), /5 of its 25 listener places free, fewer than the 10 asked/);
    assert.equal((await post(order(2), newKey())).status, 402);
  });

  test('two buyers of the last stream slot: one gets it, the other is refused and not charged', async () => {
    const asset = decodePaymentRequiredHeader((await post(order(2), newKey())).headers.get('payment-required')!)
      .accepts[0].asset;
    // Both see a free slot and sign a payment for it; then both pay at once.
    const attempts = await Promise.all(
      [newKey(), newKey()].map(async (key) => {
        const required = (await post(order(2), key)).headers.get('payment-required');
        assert.ok(required, 'the last slot is still offered');
        return { key, signature: await wallet.pay(required) };
      }),
    );
    const before = await wallet.balanceOf(asset, buyer);
    const answers = await Promise.all(attempts.map((a) => post(order(2), a.key, a.signature)));
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 503], JSON.stringify(answers.map((a) => a.body)));
    assertExhausted(answers.find((a) => a.status === 503)!, /All 2 stream slots of this deployment are taken/);
    assert.equal(
      before - (await wallet.balanceOf(asset, buyer)),
      BigInt(answers.find((a) => a.status === 200)!.body.order.amount.amount_atomic),
    );
  });

  test('once full, an order is refused at once, with nothing asked or charged', async () => {
    assertExhausted(await post(order(1), newKey()), /All 2 stream slots of this deployment are taken/);
    const full = await availabilityWhen('', (a) => a.capacity.stream_slots.free === 0);
    assert.deepEqual(full.capacity.stream_slots, { total: 2, free: 0 });
    for (const product of full.products.filter((p: any) => p.agent_orderable)) {
      assert.equal(product.available_now, false, `${product.product_id} is not available on a full host`);
      assert.match(product.reason, /Every stream slot of this host is taken/);
    }
  });

  test('a stream that expires gives its place back', { timeout: 120_000 }, async () => {
    const catalog = await shortLivedCatalog();
    await withoutCapacityReserve(catalog.catalogDir);
    const single = await startService({
      ICECAST_MAX_SOURCES: '1',
      CATALOG_DIR: catalog.catalogDir,
      RULES_DIR: catalog.rulesDir,
    });
    try {
      const payer = await buyerWallet(single);
      const brief = { ...order(1), parameters: { duration_hours: 0.002, max_listeners: 1, bitrate_kbps: 64 } };
      const bought = await buy(single, payer, brief, newKey());
      assert.equal(bought.status, 200, JSON.stringify(bought.body));
      const ask = (key: string) =>
        request(single, 'POST', '/orders', { body: brief, headers: { 'idempotency-key': key } });
      const expiresAt = new Date(bought.body.service.expires_at).getTime();
      assertExhausted(await ask(newKey()), /All 1 stream slots/, expiresAt);
      // Full until the stream expires; then the next order is asked to pay.
      await waitFor(
        'the expired stream to give its slot back',
        async () => {
          const answer = await ask(newKey());
          if (answer.status === 402) return true;
          assertExhausted(answer, /All 1 stream slots/, expiresAt);
          await sleep(200);
          return false;
        },
        Math.max(0, expiresAt - Date.now()) + 10_000,
      );
      assert.ok(Date.now() >= expiresAt, 'the slot came back at the expiry, not before');
    } finally {
      await single.stop();
      await catalog.remove();
    }
  });
});
