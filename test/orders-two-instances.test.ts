import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { request, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';

const running: Service[] = [];
after(async () => {
  for (const s of running.reverse()) await s.stop();
});

test('50 identical paid requests split across two instances on one PostgreSQL settle once', async () => {
  const first = await startService();
  running.push(first);
  const lock = JSON.parse(await readFile(join(first.dataDir, 'serve.lock'), 'utf8'));
  const dev = JSON.parse(await readFile(join(first.dataDir, 'dev.json'), 'utf8'));
  const second = await startService({ DATABASE_URL: lock.database_url, CHAIN_RPC_URL: dev.chain.rpc_url, DEV_FACILITATOR_ACCOUNT: '4' });
  running.push(second);

  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const body = { product_id: 'event-stream', email: 'agent@example.com', station_name: 'Two FM', parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 96 } };
  const key = `two-instances-${Date.now()}`;
  const ask = await request(first, 'POST', '/orders', { body, headers: { 'idempotency-key': key } });
  const header = ask.headers.get('payment-required')!;
  const { asset, payTo, amount } = decodePaymentRequiredHeader(header).accepts[0];
  assert.equal(amount, '310000');
  const signature = await wallet.pay(header);
  const sellerBefore = await wallet.balanceOf(asset, payTo);

  const answers = await Promise.all(Array.from({ length: 50 }, (_, i) =>
    request({ baseUrl: (i % 2 ? first : second).baseUrl, apiKey: first.apiKey }, 'POST', '/orders', { body, headers: { 'idempotency-key': key, 'payment-signature': signature } })));
  const ok = answers.filter((a) => a.status === 200);
  const unexpected = answers.filter((a) => a.status !== 200 && a.body.error?.code !== 'idempotency_in_progress');
  assert.deepEqual(unexpected.map((a) => a.body), []);
  assert.ok(ok.length >= 1);
  assert.equal(new Set(ok.map((a) => a.body.service.service_id)).size, 1, 'one service');
  assert.equal(new Set(ok.map((a) => a.body.order.id)).size, 1, 'one order');
  assert.equal(ok.filter((a) => !a.body.idempotent_replay).length, 1);
  assert.equal(await wallet.balanceOf(asset, payTo) - sellerBefore, 310000n, 'one settlement');

  const replayOnOther = await request({ baseUrl: second.baseUrl, apiKey: first.apiKey }, 'GET', `/orders/${ok[0].body.order.id}`);
  assert.equal(replayOnOther.status, 200);
});
