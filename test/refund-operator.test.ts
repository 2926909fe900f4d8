import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DEV_ACCOUNTS, DEV_ROLES, USDC_ADDRESS, USDC_NAME, USDC_VERSION } from '../src/chain/index.js';
import { RefundWallet, refundNonce } from '../src/refunds/index.js';
import { Database } from '../src/store/index.js';
import { buy, payFor } from './support/purchase.js';
import { mintUsdc, usdcBalance } from './support/refund-chain.js';
import { request, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { chainOwnerDevFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Operator FM',
  parameters: { duration_hours: 10, max_listeners: 1, bitrate_kbps: 64 },
};

let service: Service;
let db: Database;
let rpc: string;
let refundWallet: string;
let wallet: TestWallet;
const payer = DEV_ACCOUNTS[6];
/** A paid order for each test that stops one (taken in turn). */
let bought: Awaited<ReturnType<typeof buy>>[];
before(async () => {
  // A refund wallet with nothing in it, a daily cap below one refund, and paid orders that wait after their claim
  // (long enough to stop their service meanwhile).
  service = await startService({
    DEV_REFUND_FUNDS_ATOMIC: '0',
    REFUND_MAX_PER_DAY_ATOMIC: '150000',
    REFUND_INTERVAL_MS: '200',
    ORDER_LEASE_SECONDS: '2',
    ORDER_PAUSE_AT: 'after_claim:2500',
  });
  const dev = await chainOwnerDevFile(service);
  rpc = dev.chain.rpc_url;
  refundWallet = dev.refund_wallet.address;
  db = new Database((await serveLock(service)).database_url);
  await mintUsdc(rpc, payer.address, 20_000_000n);
  wallet = new TestWallet(payer.privateKey, rpc);
  // Every order waits ORDER_PAUSE_AT after its claim: the four services the tests stop are bought at once.
  bought = await Promise.all(Array.from({ length: 4 }, () => buy(service, wallet, body)));
});
after(async () => {
  await db?.close();
  await service?.stop();
});

const refundOf = async (serviceId: string) =>
  (await request(service, 'GET', `/services/${serviceId}/usage`)).body.usage.refund;

describe('the operator side: a daily cap, a refund wallet without funds', () => {
  let serviceId: string;

  test('a refund over the daily cap waits visibly for an operator; refunds approve lets it go', async () => {
    const ordered = bought.shift()!;
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    serviceId = ordered.body.service.service_id;
    const stopped = await request(service, 'POST', `/services/${serviceId}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.equal(stopped.body.refund.status, 'pending');
    assert.equal(stopped.body.refund.waits_for_operator, true);
    assert.match(stopped.body.refund.pending_reason, /daily cap of 0\.15 USDC/);

    const listed = JSON.parse((await service.cli(['refunds', 'list'])).stdout);
    assert.equal(listed[0].id, stopped.body.refund.id);
    assert.equal(listed[0].waits_for_operator, true);
    const approved = await service.cli(['refunds', 'approve', stopped.body.refund.id]);
    assert.equal(approved.code, 0, approved.stdout + approved.stderr);
  });

  test('the refund wallet runs dry: pending with its reason and a metric, never sent without proof; sent once funded', async () => {
    const short = await waitFor(
      'the refund postponed for lack of USDC',
      async () => {
        const refund = await refundOf(serviceId);
        return /holds 0 USDC/.test(refund.pending_reason ?? '') && refund;
      },
      30_000,
    );
    assert.equal(short.status, 'pending');
    assert.equal(short.transaction, null);
    const metrics = await (await fetch(`${service.metricsUrl}`)).text();
    assert.match(metrics, /refund_wallet_short_total\{lacks="usdc"\} [1-9]/);
    assert.match(service.output(), /refund postponed: the refund wallet/);

    const before = await usdcBalance(rpc, payer.address);
    await mintUsdc(rpc, refundWallet, 3_000_000n);
    const sent = await waitFor(
      'the refund sent once funded',
      async () => {
        const refund = await refundOf(serviceId);
        return refund.status === 'sent' && refund;
      },
      60_000,
    );
    assert.equal((await usdcBalance(rpc, payer.address)) - before, BigInt(sent.amount.amount_atomic));
  });

  const paidWhileStopping = [
    { kind: 'upgrade', column: 'upgrade_of', path: 'upgrade', body: { product_id: 'event-stream' } },
    { kind: 'extension', column: 'extension_of', path: 'extend', body: { duration_hours: 1 } },
  ];
  for (const { kind, column, path, body: paidBody } of paidWhileStopping) {
    test(`an ${kind} paid while its service is stopped is never applied and is refunded in full`, () =>
      paidWhileStopped(kind, column, path, paidBody));
  }

  async function paidWhileStopped(kind: string, column: string, path: string, paidBody: Record<string, unknown>) {
    const ordered = bought.shift()!;
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const id = ordered.body.service.service_id;
    const before = await usdcBalance(rpc, payer.address);
    const paying = payFor(service, wallet, `/services/${id}/${path}`, paidBody);
    const claimedSql = `SELECT id, amount_atomic::text FROM orders WHERE ${column} = $1 AND state = 'settling'`;
    const claimed = await waitFor(
      `the ${kind} claimed`,
      async () => (await db.query<{ id: string; amount_atomic: string }>(claimedSql, [id]))[0],
      20_000,
    );
    const stopped = await request(service, 'POST', `/services/${id}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.deepEqual(stopped.body.refund.order_ids, [ordered.body.order.id], 'the stop refunds what was provisioned');
    const paid = await paying;
    assert.equal(paid.status, 409, JSON.stringify(paid.body));
    // service_stopped, or order_refunded when the refund worker was faster than this request's own provisioning.
    assert.ok(['service_stopped', 'order_refunded'].includes(paid.body.error.code), JSON.stringify(paid.body));
    const after = (await request(service, 'GET', `/services/${id}`)).body.service;
    assert.equal(after.status, 'expired', `not revived by the ${kind}`);

    // Both refunds are over the cap of the day: the operator approves them as they come.
    const refunded = await waitFor(
      `the ${kind} refunded in full`,
      async () => {
        // The operator's commands run when the database shows a refund waiting for them (each is a process).
        const waiting = await db.query(
          "SELECT 1 FROM refunds WHERE status = 'pending' AND needs_approval AND approved_at IS NULL LIMIT 1",
        );
        if (waiting.length > 0) {
          for (const row of JSON.parse((await service.cli(['refunds', 'list'])).stdout)) {
            if (row.waits_for_operator) await service.cli(['refunds', 'approve', row.id]);
          }
        }
        const order = await request(service, 'GET', `/orders/${claimed.id}`);
        return order.body.order?.status === 'refunded' && order.body.refund?.status === 'sent' && order.body;
      },
      120_000,
    );
    assert.equal(refunded.refund.amount.amount_atomic, claimed.amount_atomic, `everything the ${kind} paid`);
    assert.equal(refunded.refund.reason, 'provisioning_failed');
    const stopRefund = await waitFor(
      'the stop refund sent',
      async () => {
        const refund = await refundOf(id);
        return refund.status === 'sent' && refund;
      },
      30_000,
    );
    assert.equal(
      (await usdcBalance(rpc, payer.address)) - before,
      BigInt(refunded.refund.amount.amount_atomic) +
        BigInt(stopRefund.amount.amount_atomic) -
        BigInt(claimed.amount_atomic),
    );
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  }

  test('a refund whose nonce someone else spent (the refund key leaked) fails visibly, never shown as sent', async () => {
    const ordered = bought.shift()!;
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const id = ordered.body.service.service_id;
    const stopped = await request(service, 'POST', `/services/${id}/stop`);
    assert.equal(stopped.body.refund.waits_for_operator, true);
    const thief = new RefundWallet({
      rpcUrl: rpc,
      chainId: 8453,
      token: USDC_ADDRESS,
      privateKey: DEV_ROLES.refunds.privateKey,
      tokenName: USDC_NAME,
      tokenVersion: USDC_VERSION,
    });
    const spent = await thief.send(DEV_ACCOUNTS[7].address, 1n, refundNonce(stopped.body.refund.id));
    assert.equal(spent.success, true);
    const approved = await service.cli(['refunds', 'approve', stopped.body.refund.id]);
    assert.equal(approved.code, 0, approved.stdout + approved.stderr);
    const failed = await waitFor(
      'the refund failed',
      async () => {
        const refund = await refundOf(id);
        return refund.status === 'failed' && refund;
      },
      30_000,
    );
    assert.equal(failed.transaction, null);
    assert.match(failed.pending_reason, /used by another transaction/);
    const [event] = await db.query<{ type: string }>(
      "SELECT type FROM events WHERE type = 'refund.failed' AND service_id = $1",
      [id],
    );
    assert.equal(event?.type, 'refund.failed');
  });
});
