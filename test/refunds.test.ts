import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { verifyReceiptSignatureJWS } from '@x402/extensions/offer-receipt';
import { DEV_ACCOUNTS } from '../src/chain/index.js';
import { buy } from './support/purchase.js';
import { jwsPayload, mintUsdc, usdcBalance } from './support/refund-chain.js';
import { openSse } from './support/sse.js';
import { request, startService, type Service } from './support/service.js';
import { connectListener, exitOf, startFfmpegSource, waitFor } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';

const body = { product_id: 'instant-stream', email: 'agent@example.com', station_name: 'Refund FM', parameters: { duration_hours: 10, max_listeners: 2, bitrate_kbps: 64 } };

let service: Service;
let dev: { chain: { rpc_url: string }; refund_wallet: { address: string } };
let wallet: TestWallet;
before(async () => {
  service = await startService({ ORDER_LEASE_SECONDS: '2', REFUND_INTERVAL_MS: '200' });
  dev = JSON.parse(await readFile(join(service.dataDir, 'dev.json'), 'utf8'));
  // A payer of its own that nothing tops up, so that its balance shows exactly what moved.
  const payer = DEV_ACCOUNTS[6];
  await mintUsdc(dev.chain.rpc_url, payer.address, 5_000_000n);
  wallet = new TestWallet(payer.privateKey, dev.chain.rpc_url);
});
after(async () => { await service?.stop(); });

describe('POST /services/{id}/stop: the service ends at once and the unused share comes back on chain', () => {
  let ordered: any;
  let stopped: any;
  let payerBefore: bigint;
  let refundWalletBefore: bigint;

  test('a streaming service is stopped: mount cut, credentials refused, refund computed after', async () => {
    ordered = await buy(service, wallet, body);
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const id = ordered.body.service.service_id;
    const source = startFfmpegSource(ordered.body.service.broadcast_url);
    const listener = await waitFor('the listener admitted', async () => {
      const l = await connectListener(ordered.body.service.stream_url).catch(() => undefined);
      if (l?.status === 200) return l;
      l?.close();
      return undefined;
    }, 20_000);
    const events = await openSse(`${service.baseUrl}/services/${id}/events`, { authorization: `Bearer ${service.apiKey}` });
    payerBefore = await usdcBalance(dev.chain.rpc_url, wallet.address);
    refundWalletBefore = await usdcBalance(dev.chain.rpc_url, dev.refund_wallet.address);

    // The request carries an address of the buyer's choosing: it is not read; the refund goes to the payer.
    stopped = await request(service, 'POST', `/services/${id}/stop`, { body: { to: DEV_ACCOUNTS[7].address, address: DEV_ACCOUNTS[7].address } });
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.equal(stopped.body.service.status, 'expired');
    assert.deepEqual(Object.keys(stopped.body.ended), ['reason', 'stopped_at']);
    assert.equal(stopped.body.ended.reason, 'stopped');
    const refund = stopped.body.refund;
    assert.equal(refund.to, wallet.address, 'to the address the payment proved');
    // 0.45 USDC for 10 hours, stopped within seconds: nearly all unused, less the 0.25 base fee.
    const amount = BigInt(refund.amount.amount_atomic);
    assert.ok(amount > 199_000n && amount < 200_000n, String(amount));
    assert.ok(['pending', 'sent'].includes(refund.status));

    assert.notEqual(await exitOf(source, 10_000), undefined, 'the source was cut');
    await listener.ended;
    const again = startFfmpegSource(ordered.body.service.broadcast_url);
    assert.notEqual(await exitOf(again, 10_000), 0, 'the source credentials are refused');
    const refused = await connectListener(ordered.body.service.stream_url);
    refused.close();
    assert.notEqual(refused.status, 200, 'listeners are refused');

    await waitFor('service.stopped and refund.sent events', () => events.messages.some((m) => m.event === 'refund.sent') && events.messages, 20_000);
    events.close();
    const types = events.messages.map((m) => m.event);
    assert.ok(types.indexOf('service.stopped') >= 0 && types.indexOf('service.stopped') < types.indexOf('refund.sent'), types.join(','));
  });

  test('the refund counts as sent only with its transfer on chain: balances moved by exactly the amount', async () => {
    const id = ordered.body.service.service_id;
    const usage = await waitFor('the refund sent', async () => {
      const u = await request(service, 'GET', `/services/${id}/usage`);
      return u.body.usage.refund?.status === 'sent' && u.body.usage;
    }, 20_000);
    const refund = usage.refund;
    assert.equal(usage.ended.reason, 'stopped');
    assert.equal(refund.amount.amount_atomic, stopped.body.refund.amount.amount_atomic);
    assert.match(refund.transaction, /^0x[0-9a-f]{64}$/);
    const amount = BigInt(refund.amount.amount_atomic);
    assert.equal(await usdcBalance(dev.chain.rpc_url, wallet.address) - payerBefore, amount);
    assert.equal(refundWalletBefore - await usdcBalance(dev.chain.rpc_url, dev.refund_wallet.address), amount);
    assert.equal(await usdcBalance(dev.chain.rpc_url, DEV_ACCOUNTS[7].address), 0n, 'nothing to the address the request named');

    const stated = await verifyReceiptSignatureJWS(refund.receipt) as unknown as Record<string, unknown>;
    assert.equal(stated.kind, 'refund');
    assert.equal(stated.serviceId, id);
    assert.deepEqual(stated.orderIds, [ordered.body.order.id]);
    assert.equal(stated.amount, refund.amount.amount_atomic);
    assert.equal(stated.transaction, refund.transaction);
    assert.equal(stated.payer, wallet.address);

    const order = await request(service, 'GET', `/orders/${ordered.body.order.id}`);
    assert.equal(order.body.refund.transaction, refund.transaction);
    assert.equal(order.body.service_ended.reason, 'stopped');
  });

  test('a repeated stop is the same refund and the same receipt; nothing is sent twice', async () => {
    const id = ordered.body.service.service_id;
    const first = (await request(service, 'GET', `/services/${id}/usage`)).body.usage.refund;
    const payerNow = await usdcBalance(dev.chain.rpc_url, wallet.address);
    const again = await request(service, 'POST', `/services/${id}/stop`);
    assert.equal(again.status, 200);
    assert.equal(again.body.idempotent_replay, true);
    assert.equal(again.body.refund.id, first.id);
    assert.equal(again.body.refund.receipt.signature, first.receipt.signature);
    assert.equal(again.body.refund.transaction, first.transaction);
    assert.equal(jwsPayload(again.body.refund.receipt.signature).refundId, first.id);
    assert.equal(await usdcBalance(dev.chain.rpc_url, wallet.address), payerNow);
  });

  test('someone else\'s service: the same 404 as an unknown id', async () => {
    const id = ordered.body.service.service_id;
    const other = await service.cli(['keys', 'create', '--name', 'someone-else']);
    const otherKey = JSON.parse(other.stdout).api_key;
    const theirs = await request({ baseUrl: service.baseUrl, apiKey: otherKey }, 'POST', `/services/${id}/stop`);
    const unknown = await request(service, 'POST', '/services/svc_doesnotexist42/stop');
    assert.equal(theirs.status, 404);
    assert.equal(unknown.status, 404);
    assert.equal(theirs.body.error.code, unknown.body.error.code);
    assert.equal(theirs.body.error.message, unknown.body.error.message);
  });

  test('audit replay, verify, export and verify-bundle cover the refund', async () => {
    const refund = (await request(service, 'GET', `/services/${ordered.body.service.service_id}/usage`)).body.usage.refund;
    const replay = await service.cli(['audit', 'replay', refund.evaluation_id]);
    assert.equal(replay.code, 0, replay.stdout + replay.stderr);
    assert.match(replay.stdout, /"identical":true/);
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    const file = join(service.dataDir, 'refund-bundle.json');
    const exported = await service.cli(['audit', 'export', '--order', ordered.body.service.service_id, '--out', file]);
    assert.equal(exported.code, 0, exported.stderr);
    const bundle = JSON.parse(await readFile(file, 'utf8'));
    const kinds = bundle.records.map((r: { kind: string }) => r.kind);
    assert.ok(kinds.includes('refund_evaluation') && kinds.includes('refund_sent'), kinds.join(','));
    const proof = JSON.parse(bundle.records.find((r: { kind: string }) => r.kind === 'refund_sent').record);
    assert.equal(proof.proof.transaction, refund.transaction);
    const checked = await service.cli(['audit', 'verify-bundle', file]);
    assert.equal(checked.code, 0, checked.stdout + checked.stderr);
  });
});
