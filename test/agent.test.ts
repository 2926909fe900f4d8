import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { runAgent } from '../scripts/agent.js';
import { USDC_ADDRESS } from '../src/chain/token.js';
import { startService, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';

requireStreamingTools();
let service: Service;

before(async () => {
  // service.expiring is announced an hour ahead here, so that a one-hour stream's warning comes at once.
  service = await startService({ WEBHOOK_ALLOW_INSECURE_LOOPBACK: '1', EVENTS_EXPIRING_LEAD_SECONDS: '3660' });
});
after(() => service?.stop());

test('an agent with only the base URL and a funded wallet discovers, signs in for a key, buys over MCP, hears the events and reads its usage as the wallet', { timeout: 300_000 }, async () => {
  const dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  const keysBefore = (await service.cli(['keys', 'list'])).stdout;
  const steps: string[] = [];
  const usdcBefore = await wallet.balanceOf(USDC_ADDRESS, wallet.address);

  const outcome = await runAgent({
    baseUrl: service.baseUrl, privateKey: dev.buyer.private_key,
    awaitEvents: ['service.active', 'service.expiring'], timeoutMs: 180_000,
    report: (step) => steps.push(step),
  });

  assert.deepEqual(steps, ['discovered', 'signed in', 'webhook registered', 'bought over MCP', 'events over SSE', 'events by webhook', 'usage by wallet sign-in']);
  assert.match(outcome.discovered.orderResource, /\/api\/v1\/orders$/);
  assert.equal(outcome.apiKeyPrefix, 'aak_');
  assert.notEqual((await service.cli(['keys', 'list'])).stdout, keysBefore, 'a new key exists, issued to the wallet');
  for (const type of ['order.paid', 'service.active', 'service.expiring']) {
    assert.ok(outcome.webhookEvents.includes(type), `${type} by webhook: ${outcome.webhookEvents}`);
    assert.ok(outcome.sseEvents.includes(type), `${type} over SSE: ${outcome.sseEvents}`);
  }
  assert.ok(outcome.sseEvents.indexOf('service.active') < outcome.sseEvents.indexOf('service.expiring'));
  assert.equal(typeof outcome.usage, 'object');
  assert.equal(await wallet.balanceOf(USDC_ADDRESS, wallet.address), usdcBefore - BigInt(outcome.amountAtomic), 'charged exactly the price, once');
  const order = await service.cli(['audit', 'show', outcome.orderId]);
  assert.equal(order.code, 0, order.stderr);
});
