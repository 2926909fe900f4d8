import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runAgent } from '../scripts/agent.js';
import { USDC_ADDRESS } from '../src/chain/token.js';
import { startService, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile } from './support/dev-file.js';

requireStreamingTools();
let service: Service;

before(async () => {
  // service.expiring is announced two hours ahead here, so that a one-hour stream extended by an hour warns at once.
  service = await startService({
    WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1',
    EVENTS_EXPIRING_LEAD_SECONDS: '7260',
    REFUND_INTERVAL_MS: '200',
  });
});
after(() => service?.stop());

test('an agent with only the base URL and a funded wallet discovers, signs in for a key, buys and extends over MCP, ' +
  'hears the events, reads its usage as the wallet, stops and gets its refund', { timeout: 300_000 }, async () => {
  const dev = await devFile(service);
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const keysBefore = (await service.cli(['keys', 'list'])).stdout;
  const steps: string[] = [];
  const usdcBefore = await wallet.balanceOf(USDC_ADDRESS, wallet.address);

  const outcome = await runAgent({
    baseUrl: service.baseUrl,
    privateKey: dev.buyer.private_key,
    awaitEvents: ['service.active', 'service.expiring'],
    timeoutMs: 180_000,
    report: (step) => steps.push(step),
    extendHours: 1,
    stopAtEnd: true,
  });

  assert.deepEqual(steps, [
    'discovered',
    'signed in',
    'webhook registered',
    'bought over MCP',
    'extended over MCP',
    'events over SSE',
    'events by webhook',
    'usage by wallet sign-in',
    'stopped',
    'refund',
  ]);
  const extension = outcome.extension!;
  const moved = Date.parse(extension.expiresAfter) - Date.parse(extension.expiresBefore);
  assert.equal(moved, 3_600_000, 'the old expiry plus the hour paid');
  assert.equal(extension.amountAtomic, '270000');
  assert.equal(outcome.refund?.status, 'sent');
  assert.match(String(outcome.refund?.transaction), /^0x[0-9a-f]{64}$/);
  const refunded = BigInt((outcome.refund?.amount as { amount_atomic: string }).amount_atomic);
  assert.match(outcome.discovered.orderResource, /\/api\/v1\/orders$/);
  assert.equal(outcome.apiKeyPrefix, 'aak_');
  assert.notEqual((await service.cli(['keys', 'list'])).stdout, keysBefore, 'a new key exists, issued to the wallet');
  for (const type of ['order.paid', 'service.active', 'service.expiring']) {
    assert.ok(outcome.webhookEvents.includes(type), `${type} by webhook: ${outcome.webhookEvents}`);
    assert.ok(outcome.sseEvents.includes(type), `${type} over SSE: ${outcome.sseEvents}`);
  }
  assert.ok(outcome.sseEvents.indexOf('service.active') < outcome.sseEvents.indexOf('service.expiring'));
  assert.equal(typeof outcome.usage, 'object');
  const expected = usdcBefore - BigInt(outcome.amountAtomic) - BigInt(extension.amountAtomic) + refunded;
  assert.equal(
    await wallet.balanceOf(USDC_ADDRESS, wallet.address),
    expected,
    'charged exactly the prices, once each, and refunded exactly the amount stated',
  );
  const order = await service.cli(['audit', 'show', outcome.orderId]);
  assert.equal(order.code, 0, order.stderr);
});
