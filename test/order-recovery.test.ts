import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { request, scratchDir, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

const running: Service[] = [];
after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
});

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Crash FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};
const fast = { ORDER_LEASE_SECONDS: '1', ORDER_RECOVERY_INTERVAL_MS: '200' };

async function start(dataDir: string, env: Record<string, string>) {
  const service = await startService({ ...fast, ...env }, { dataDir });
  running.push(service);
  return service;
}

/** Repeats the request until it stops being "in progress" (or a dependency is briefly away). */
async function retryUntilSettled(service: Service, key: string, signature: string) {
  for (let i = 0; i < 100; i++) {
    const response = await request(service, 'POST', '/orders', {
      body,
      headers: { 'idempotency-key': key, 'payment-signature': signature },
    });
    if (!response.body.error?.retryable) return response;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the order never settled');
}

// Each crash point has its own data directory, PostgreSQL and chain: the four run at once, their waits overlapping.
describe('an instance killed (SIGKILL) between two steps of an order', { concurrency: 4 }, () => {
  for (const point of ['after_claim', 'after_chain_settle', 'after_settled', 'after_provision']) {
    test(`${point}: after a restart the retry gets the order, charged exactly once`, async () => {
      const dataDir = await scratchDir('audio-crash-');
      const doomed = await start(dataDir, { ORDER_CRASH_AT: point });
      const dev = await devFile(dataDir);
      const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
      const key = `crash-${point}`;
      const ask = await request(doomed, 'POST', '/orders', { body, headers: { 'idempotency-key': key } });
      const header = ask.headers.get('payment-required')!;
      const { asset, payTo } = decodePaymentRequiredHeader(header).accepts[0];
      const sellerBefore = await wallet.balanceOf(asset, payTo);
      const signature = await wallet.pay(header);

      await assert.rejects(
        request(doomed, 'POST', '/orders', {
          body,
          headers: { 'idempotency-key': key, 'payment-signature': signature },
        }),
        'the instance dies mid-order',
      );
      assert.equal(await doomed.stop(), null, 'killed by a signal');

      const revived = await start(dataDir, {});
      const revivedDev = await devFile(dataDir);
      const chain = new TestWallet(dev.buyer.private_key, revivedDev.chain.rpc_url);
      const response = await retryUntilSettled(revived, key, signature);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(response.body.idempotent_replay, true, 'the order the killed instance began');
      assert.equal(response.body.service.status, 'active');
      assert.equal(decodePaymentResponseHeader(response.headers.get('payment-response')!).success, true);
      // The buyer's test wallet is topped up on every start, so the seller's side tells what moved.
      assert.equal((await chain.balanceOf(asset, payTo)) - sellerBefore, 270000n, 'charged exactly once');

      const again = await request(revived, 'POST', '/orders', {
        body,
        headers: { 'idempotency-key': `${key}-other`, 'payment-signature': signature },
      });
      assert.equal(again.status, 409);
      assert.equal(again.body.error.code, 'payment_already_used');
      await revived.stop();
      recovered = { dataDir, service: response.body.service };
    });
  }
});

/** The last crash test's data directory and the service its order delivered after the restart. */
let recovered: { dataDir: string; service: { service_id: string; expires_at: string } } | undefined;

async function orderOnNewInstance() {
  const dataDir = await scratchDir('audio-crash-ext-');
  const first = await start(dataDir, {});
  const dev = await devFile(dataDir);
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const ask = await request(first, 'POST', '/orders', { body, headers: { 'idempotency-key': 'ext-order' } });
  const ordered = await retryUntilSettled(first, 'ext-order', await wallet.pay(ask.headers.get('payment-required')!));
  assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
  await first.stop();
  return { dataDir, service: ordered.body.service };
}

describe('an instance killed while an extension is being paid', () => {
  test('after_settled: the recovery loop finishes the extension by itself; the retry gets it, charged exactly once', async () => {
    // The active service an earlier test recovered (its instance stopped), or one bought here when run alone.
    const { dataDir, service: svc } = recovered ?? (await orderOnNewInstance());
    const dev = await devFile(dataDir);

    const doomed = await start(dataDir, { ORDER_CRASH_AT: 'after_settled' });
    // Each start runs the chain on a new port.
    const paying = new TestWallet(dev.buyer.private_key, (await devFile(dataDir)).chain.rpc_url);
    const path = `/services/${svc.service_id}/extend`;
    const extension = { body: { duration_hours: 2 }, headers: { 'idempotency-key': 'ext-crash' } };
    const ask = await request(doomed, 'POST', path, extension);
    assert.equal(ask.status, 402, JSON.stringify(ask.body));
    const header = ask.headers.get('payment-required')!;
    const { asset, payTo } = decodePaymentRequiredHeader(header).accepts[0];
    const sellerBefore = await paying.balanceOf(asset, payTo);
    const signature = await paying.pay(header);
    await assert.rejects(
      request(doomed, 'POST', path, {
        ...extension,
        headers: { ...extension.headers, 'payment-signature': signature },
      }),
      'the instance dies mid-extension',
    );
    assert.equal(await doomed.stop(), null, 'killed by a signal');

    const revived = await start(dataDir, {});
    const revivedDev = await devFile(dataDir);
    const chain = new TestWallet(dev.buyer.private_key, revivedDev.chain.rpc_url);
    const moved = Date.parse(svc.expires_at) + 2 * 3_600_000;
    // Nobody retries: the recovery loop alone applies the paid extension.
    for (let i = 0; i < 100; i++) {
      const read = await request(revived, 'GET', `/services/${svc.service_id}`);
      if (Date.parse(read.body.service.expires_at) === moved) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(
      Date.parse((await request(revived, 'GET', `/services/${svc.service_id}`)).body.service.expires_at),
      moved,
      'extended by recovery',
    );
    const retry = await request(revived, 'POST', path, {
      ...extension,
      headers: { ...extension.headers, 'payment-signature': signature },
    });
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.equal(retry.body.idempotent_replay, true);
    assert.equal(retry.body.order.extension_of, svc.service_id);
    assert.equal(Date.parse(retry.body.service.expires_at), moved, 'applied once');
    assert.equal((await chain.balanceOf(asset, payTo)) - sellerBefore, 270000n, 'charged exactly once');
    await revived.stop();
  });
});
