import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { verifyReceiptSignatureJWS } from '@x402/extensions/offer-receipt';
import { DEV_ACCOUNTS } from '../src/chain/index.js';
import { Database } from '../src/store/index.js';
import { buy, payFor } from './support/purchase.js';
import { jwsPayload, mintUsdc, usdcBalance } from './support/refund-chain.js';
import { openSse } from './support/sse.js';
import { createApiKey } from './support/api-key.js';
import { cli, request, scratchDir, startService, type Service } from './support/service.js';
import { connectListener, exitOf, startFfmpegSource, waitFor } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { chainOwnerDevFile, type DevFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Refund FM',
  parameters: { duration_hours: 10, max_listeners: 2, bitrate_kbps: 64 },
};

let service: Service;
let dev: Required<DevFile>;
let wallet: TestWallet;
let db: Database;
before(async () => {
  // A paid order not provisioned after 2 s is refunded in full.
  service = await startService({
    ORDER_LEASE_SECONDS: '2',
    REFUND_INTERVAL_MS: '200',
    REFUND_PROVISION_TIMEOUT_SECONDS: '2',
  });
  dev = await chainOwnerDevFile(service);
  db = new Database((await serveLock(service)).database_url);
  // A payer of its own that nothing tops up, so that its balance shows exactly what moved.
  const payer = DEV_ACCOUNTS[6];
  await mintUsdc(dev.chain.rpc_url, payer.address, 5_000_000n);
  wallet = new TestWallet(payer.privateKey, dev.chain.rpc_url);
});
after(async () => {
  await db?.close();
  await service?.stop();
});

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
    const listener = await waitFor(
      'the listener admitted',
      async () => {
        const l = await connectListener(ordered.body.service.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      20_000,
    );
    const events = await openSse(`${service.baseUrl}/services/${id}/events`, {
      authorization: `Bearer ${service.apiKey}`,
    });
    payerBefore = await usdcBalance(dev.chain.rpc_url, wallet.address);
    refundWalletBefore = await usdcBalance(dev.chain.rpc_url, dev.refund_wallet.address);

    // The request carries an address of the buyer's choosing: it is not read; the refund goes to the payer.
    stopped = await request(service, 'POST', `/services/${id}/stop`, {
      body: { to: DEV_ACCOUNTS[7].address, address: DEV_ACCOUNTS[7].address },
    });
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    assert.equal(stopped.body.service.status, 'expired');
    assert.deepEqual(Object.keys(stopped.body.ended), ['reason', 'stopped_at']);
    assert.equal(stopped.body.ended.reason, 'stopped');
    const refund = stopped.body.refund;
    assert.equal(refund.to, wallet.address, 'to the address the payment proved');
    // 0.45 USDC for 10 hours, stopped within seconds: the 0.25 base fee is kept, nearly all the 10 h at 0.02 come back.
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

    await waitFor(
      'service.stopped and refund.sent events',
      () => events.messages.some((m) => m.event === 'refund.sent') && events.messages,
      20_000,
    );
    events.close();
    const types = events.messages.map((m) => m.event);
    assert.ok(
      types.indexOf('service.stopped') >= 0 && types.indexOf('service.stopped') < types.indexOf('refund.sent'),
      types.join(','),
    );
  });

  test('the refund counts as sent only with its transfer on chain: balances moved by exactly the amount', async () => {
    const id = ordered.body.service.service_id;
    const usage = await waitFor(
      'the refund sent',
      async () => {
        const u = await request(service, 'GET', `/services/${id}/usage`);
        return u.body.usage.refund?.status === 'sent' && u.body.usage;
      },
      20_000,
    );
    const refund = usage.refund;
    assert.equal(usage.ended.reason, 'stopped');
    assert.equal(refund.amount.amount_atomic, stopped.body.refund.amount.amount_atomic);
    assert.match(refund.transaction, /^0x[0-9a-f]{64}$/);
    const amount = BigInt(refund.amount.amount_atomic);
    assert.equal((await usdcBalance(dev.chain.rpc_url, wallet.address)) - payerBefore, amount);
    assert.equal(refundWalletBefore - (await usdcBalance(dev.chain.rpc_url, dev.refund_wallet.address)), amount);
    assert.equal(
      await usdcBalance(dev.chain.rpc_url, DEV_ACCOUNTS[7].address),
      0n,
      'nothing to the address the request named',
    );

    const stated = (await verifyReceiptSignatureJWS(refund.receipt)) as unknown as Record<string, unknown>;
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

  test("someone else's service: the same 404 as an unknown id", async () => {
    const id = ordered.body.service.service_id;
    const otherKey = (await createApiKey(service, 'someone-else')).api_key;
    const theirs = await request({ baseUrl: service.baseUrl, apiKey: otherKey }, 'POST', `/services/${id}/stop`);
    const unknown = await request(service, 'POST', '/services/svc_doesnotexist42/stop');
    assert.equal(theirs.status, 404);
    assert.equal(unknown.status, 404);
    assert.equal(theirs.body.error.code, unknown.body.error.code);
    assert.equal(theirs.body.error.message, unknown.body.error.message);
  });

  test('audit replay, verify, export and verify-bundle cover the refund', async () => {
    const refund = (await request(service, 'GET', `/services/${ordered.body.service.service_id}/usage`)).body.usage
      .refund;
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

  test('audit export --order ORDER_ID carries the refund that paid it back, its transaction and receipt, checked offline', async () => {
    const refund = (await request(service, 'GET', `/services/${ordered.body.service.service_id}/usage`)).body.usage
      .refund;
    const dir = await scratchDir('refund-bundle-');
    const file = join(dir, 'order.json');
    const exported = await service.cli(['audit', 'export', `--order=${ordered.body.order.id}`, '--out', file]);
    assert.equal(exported.code, 0, exported.stderr);
    const bundle = JSON.parse(await readFile(file, 'utf8'));
    const ids = bundle.records.map((r: { id: string }) => r.id);
    assert.ok(ids.includes(refund.evaluation_id), 'the refund evaluation');
    const proof = bundle.records.find((r: { kind: string }) => r.kind === 'refund_sent');
    assert.equal(JSON.parse(proof.record).proof.transaction, refund.transaction);
    const carried = bundle.refunds[refund.id];
    assert.equal(carried.transaction, refund.transaction);
    assert.equal(carried.amount_atomic, refund.amount.amount_atomic);
    assert.equal(carried.receipt.signature, refund.receipt.signature, 'the receipt the owner was given');

    const offline = { DATA_DIR: await scratchDir('refund-offline-'), DATABASE_URL: '' };
    const checked = await cli(['audit', 'verify-bundle', file], offline);
    assert.equal(checked.code, 0, checked.stdout + checked.stderr);
    assert.ok(
      checked.stdout.includes(
        `refund ${refund.id}: ${refund.amount.amount_atomic} atomic units back to ${wallet.address}`,
      ),
      checked.stdout,
    );
    assert.ok(checked.stdout.includes(`transaction ${refund.transaction}, proven on chain and receipted`));

    const other = `0x${'ab'.repeat(32)}`;
    const tampered = structuredClone(bundle);
    tampered.refunds[refund.id].transaction = other;
    await writeFile(join(dir, 'transaction.json'), JSON.stringify(tampered));
    const moved = await cli(['audit', 'verify-bundle', join(dir, 'transaction.json')], offline);
    assert.equal(moved.code, 1, moved.stdout);
    assert.match(moved.stderr, new RegExp(`refund ${refund.id}: its transaction ${other} is not the chained proof's`));
    assert.match(moved.stderr, /its receipt states transaction "0x[0-9a-f]{64}", the refund "0xabab/);

    const forged = structuredClone(bundle);
    const [header, , signature] = forged.refunds[refund.id].receipt.signature.split('.');
    const payload = Buffer.from(JSON.stringify({ ...jwsPayload(refund.receipt.signature), amount: '1' })).toString(
      'base64url',
    );
    forged.refunds[refund.id].receipt.signature = `${header}.${payload}.${signature}`;
    await writeFile(join(dir, 'receipt.json'), JSON.stringify(forged));
    const unsigned = await cli(['audit', 'verify-bundle', join(dir, 'receipt.json')], offline);
    assert.equal(unsigned.code, 1, unsigned.stdout);
    assert.match(unsigned.stderr, /its receipt is not signed by the operator key/);
  });
});

describe('a service paid by two wallets: each gets back what it paid for, to the wallet that paid it', () => {
  test('an order by wallet A, an extension by wallet B, a stop: two transfers, balances checked on chain', async () => {
    const walletB = new TestWallet(DEV_ACCOUNTS[8].privateKey, dev.chain.rpc_url);
    await mintUsdc(dev.chain.rpc_url, walletB.address, 1_000_000n);
    const ordered = await buy(service, wallet, { ...body, station_name: 'Two Wallets FM' });
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const id = ordered.body.service.service_id;
    // The owner's key, wallet B's money: 10 more hours, at the order minimum of 0.27.
    const extended = await payFor(service, walletB, `/services/${id}/extend`, { duration_hours: 10 });
    assert.equal(extended.status, 200, JSON.stringify(extended.body));
    const paidA = BigInt(ordered.body.order.amount.amount_atomic);
    const paidB = BigInt(extended.body.order.amount.amount_atomic);
    assert.equal(paidB, 270_000n);
    const balances = () =>
      Promise.all(
        [wallet.address, walletB.address, dev.refund_wallet.address].map((address) =>
          usdcBalance(dev.chain.rpc_url, address),
        ),
      );
    const [beforeA, beforeB, beforeRefunds] = await balances();

    const stopped = await request(service, 'POST', `/services/${id}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    const refund = stopped.body.refund;
    assert.equal(refund.to, null, 'several wallets: see the transfers');
    assert.deepEqual(
      refund.transfers.map((t: any) => t.to).sort(),
      [wallet.address, walletB.address].sort(),
      'one transfer to each paying wallet (in no set order)',
    );
    const transferTo = (address: string) => refund.transfers.find((t: any) => t.to === address);
    const [transferA, transferB] = [transferTo(wallet.address), transferTo(walletB.address)];
    assert.deepEqual([transferA.order_ids, transferB.order_ids], [[ordered.body.order.id], [extended.body.order.id]]);
    // The extension's hours are the last ones, all unused: B gets back all it paid. A's order bore the base fee.
    const [toA, toB] = [transferA, transferB].map((t: any) => BigInt(t.amount.amount_atomic));
    assert.equal(toB, paidB);
    assert.ok(toA > 199_000n && toA < 200_000n, String(toA));
    assert.equal(BigInt(refund.amount.amount_atomic), toA + toB);

    const sent = await waitFor(
      'both transfers sent',
      async () => {
        const r = (await request(service, 'GET', `/services/${id}/usage`)).body.usage.refund;
        return r.status === 'sent' && r;
      },
      60_000,
    );
    const [afterA, afterB, afterRefunds] = await balances();
    assert.equal(afterA - beforeA, toA);
    assert.equal(afterB - beforeB, toB);
    assert.equal(beforeRefunds - afterRefunds, toA + toB);
    assert.ok(toA <= paidA && toB <= paidB, 'nobody gets back more than it paid');
    for (const transfer of sent.transfers) {
      const stated = (await verifyReceiptSignatureJWS(transfer.receipt)) as unknown as Record<string, unknown>;
      assert.equal(stated.payer, transfer.to);
      assert.equal(stated.transaction, transfer.transaction);
      assert.equal(stated.amount, transfer.amount.amount_atomic);
      assert.deepEqual(stated.orderIds, transfer.order_ids);
    }
    assert.notEqual(sent.transfers[0].transaction, sent.transfers[1].transaction);
    const again = await request(service, 'POST', `/services/${id}/stop`);
    const transactions = (refund: any) => refund.transfers.map((t: any) => t.transaction);
    assert.deepEqual(transactions(again.body.refund), transactions(sent));
    const replay = await service.cli(['audit', 'replay', sent.evaluation_id]);
    assert.match(replay.stdout, /"identical":true/, replay.stdout + replay.stderr);
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  });
});

describe('the refund rule: the base fee kept once, every unused hour back at the rate it was bought', () => {
  test('a 10 h stream (0.45) stopped after 5 h gets 5 x 0.02 back (not 0)', async () => {
    const ordered = await buy(service, wallet, { ...body, station_name: 'Half Used FM' });
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const id = ordered.body.service.service_id;
    // Five of its hours have run: its paid time ends 5 h from now.
    await db.query("UPDATE services SET expires_at = now() + interval '5 hours' WHERE id = $1", [id]);
    const stopped = await request(service, 'POST', `/services/${id}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    const amount = BigInt(stopped.body.refund.amount.amount_atomic);
    // 5 h at 0.02, less the few seconds between the update and the stop (0.02 USDC an hour: 6 atomic units a second).
    assert.ok(amount > 99_000n && amount <= 100_000n, String(amount));
  });

  test('order 4 h, extend 20 h, upgrade, stop at once: everything paid comes back but the base fee', async () => {
    const ordered = await buy(service, wallet, {
      ...body,
      station_name: 'Upgraded Late FM',
      parameters: { ...body.parameters, duration_hours: 4 },
    });
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const id = ordered.body.service.service_id;
    const extended = await payFor(service, wallet, `/services/${id}/extend`, { duration_hours: 20 });
    assert.equal(extended.status, 200, JSON.stringify(extended.body));
    const upgraded = await payFor(service, wallet, `/services/${id}/upgrade`, { product_id: 'event-stream' });
    assert.equal(upgraded.status, 200, JSON.stringify(upgraded.body));
    const paid = [ordered, extended, upgraded].map((r) => BigInt(r.body.order.amount.amount_atomic));
    // The shipped catalog: 0.33 (0.25 base fee and 4 h), 0.40 (20 h), 0.27 (the order minimum, for the 24 h left).
    assert.deepEqual(paid, [330_000n, 400_000n, 270_000n]);
    const stopped = await request(service, 'POST', `/services/${id}/stop`);
    assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    const amount = BigInt(stopped.body.refund.amount.amount_atomic);
    // 0.75 less the seconds that ran (about 9 atomic units a second); earlier rules counted the upgrade against
    // the order's 4 h only and 20/24 of it kept: 0.524970.
    const expected = paid.reduce((sum, a) => sum + a, 0n) - 250_000n;
    assert.ok(amount > expected - 1_000n && amount <= expected, `${amount} of ${expected}`);
    const evaluation = (await request(service, 'GET', `/services/${id}/usage`)).body.usage.refund.evaluation_id;
    const replay = await service.cli(['audit', 'replay', evaluation]);
    assert.match(replay.stdout, /"identical":true/, replay.stdout + replay.stderr);
    // The record names the hours each payment paid for and the base fee the order's own price evaluation charged.
    const [{ record }] = await db.query<{ record: string }>('SELECT record FROM audit_records WHERE id = $1', [
      evaluation,
    ]);
    const payments = JSON.parse(record).input.payments;
    assert.deepEqual(
      payments.map((p: any) => [p.kind, p.hours, p.base_atomic]),
      [
        ['order', '4', '250000'],
        ['extension', '20', undefined],
        ['upgrade', '24', undefined],
      ],
    );
  });
});

describe('a paid order that cannot be provisioned is refunded in full, automatically', () => {
  test('provisioning fails for real: 503, audit verify reports it past the bound, then refunded on chain', async () => {
    // Every new service row is refused by the database, as a full disk or a broken host would refuse it.
    await db.query(`CREATE FUNCTION test_refuse_services() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'no room for a new service (test fault)'; END $$`);
    await db.query(`CREATE TRIGGER test_refuse_services BEFORE INSERT ON services
      FOR EACH ROW EXECUTE FUNCTION test_refuse_services()`);
    // Refunds of the tests before (sent by the worker later) must not land in this test's balance checks.
    await waitFor(
      'earlier refunds sent',
      async () => (await db.query("SELECT 1 FROM refunds WHERE status IN ('computing', 'pending')")).length === 0,
      60_000,
    );
    // While the test holds this lock the refund worker cannot write: audit verify sees the order as the bound passes.
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let locked!: () => void;
    const lockTaken = new Promise<void>((resolve) => {
      locked = resolve;
    });
    const holding = db.transaction(async (client) => {
      await client.query('LOCK TABLE refunds IN SHARE MODE');
      locked();
      await held;
    });
    try {
      await lockTaken;
      const before = await usdcBalance(dev.chain.rpc_url, wallet.address);
      const key = randomUUID();
      const failed = await buy(service, wallet, { ...body, station_name: 'Never Provisioned FM' }, key);
      assert.equal(failed.status, 503, JSON.stringify(failed.body));
      assert.equal(failed.body.error.code, 'provisioning_pending');
      assert.equal(failed.body.error.retryable, true);
      const orderId = failed.body.error.details[0].order_id;
      assert.match(failed.body.error.message, /refunded automatically/);
      assert.equal(await usdcBalance(dev.chain.rpc_url, wallet.address), before - 450_000n, 'the payment was taken');

      // Each audit verify is a process of its own: run it once the order is past the bound (seen in the database).
      await waitFor(
        'the order settled more than 2 s ago and still provisioning',
        async () =>
          (
            await db.query(
              "SELECT 1 FROM orders WHERE id = $1 AND state = 'provisioning' AND settled_at < now() - interval '2 s'",
              [orderId],
            )
          ).length === 1,
        60_000,
      );
      const reported = await waitFor(
        'audit verify reports the undelivered order',
        async () => {
          const verify = await service.cli(['audit', 'verify']);
          return verify.code !== 0 && verify.stderr.includes(orderId) && verify;
        },
        60_000,
      );
      const problem = new RegExp(`order ${orderId}: settled at .* neither provisioned nor refunded after 2 s`);
      assert.match(reported.stderr, problem);
      assert.match(reported.stdout, /the chain is intact; 1 paid orders neither provisioned nor refunded/);
      release();
      await holding;

      const order = await waitFor(
        'the order refunded and the refund sent',
        async () => {
          const o = await request(service, 'GET', `/orders/${orderId}`);
          return o.body.order?.status === 'refunded' && o.body.refund?.status === 'sent' && o.body;
        },
        60_000,
      );
      assert.equal(order.refund.reason, 'provisioning_failed');
      assert.equal(order.refund.amount.amount_atomic, '450000', 'everything it paid');
      assert.equal(order.refund.to, wallet.address);
      assert.equal(await usdcBalance(dev.chain.rpc_url, wallet.address), before, 'the buyer has all its money back');
      const stated = (await verifyReceiptSignatureJWS(order.refund.receipt)) as unknown as Record<string, unknown>;
      assert.deepEqual(stated.orderIds, [orderId]);
      const events = await db.query<{ type: string; data: { reason: string } }>(
        'SELECT type, data FROM events WHERE order_id = $1 ORDER BY created_at',
        [orderId],
      );
      const heard = events.some((e) => e.type === 'refund.sent' && e.data.reason === 'provisioning_failed');
      assert.ok(heard, JSON.stringify(events));
      const records = await db.query<{ kind: string }>(
        'SELECT kind FROM audit_records WHERE subject = $1 ORDER BY seq',
        [orderId],
      );
      const kinds = records.map((r) => r.kind);
      assert.ok(kinds.includes('refund_evaluation') && kinds.includes('refund_sent'), kinds.join(','));
      const retried = await buy(service, wallet, { ...body, station_name: 'Never Provisioned FM' }, key);
      assert.equal(retried.status, 409, JSON.stringify(retried.body));
      assert.equal(retried.body.error.code, 'order_refunded');
      assert.equal(await usdcBalance(dev.chain.rpc_url, wallet.address), before, 'the same key charges nothing more');
      const verify = await service.cli(['audit', 'verify']);
      assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    } finally {
      release();
      await holding.catch(() => undefined);
      await db.query('DROP TRIGGER IF EXISTS test_refuse_services ON services');
    }
  });
});

describe('a refund wallet without gas', () => {
  const setEth = (address: string, wei: bigint) =>
    fetch(dev.chain.rpc_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'anvil_setBalance',
        params: [address, `0x${wei.toString(16)}`],
      }),
    }).then((r) => r.json());

  test('the refund waits with the reason and a metric, never sent without proof; sent once it has gas', async () => {
    await setEth(dev.refund_wallet.address, 0n);
    try {
      const ordered = await buy(service, wallet, { ...body, station_name: 'No Gas FM' });
      assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
      const id = ordered.body.service.service_id;
      const before = await usdcBalance(dev.chain.rpc_url, wallet.address);
      assert.equal((await request(service, 'POST', `/services/${id}/stop`)).status, 200);
      const short = await waitFor(
        'the refund postponed for lack of gas',
        async () => {
          const refund = (await request(service, 'GET', `/services/${id}/usage`)).body.usage.refund;
          return /lacks gas/.test(refund.pending_reason ?? '') && refund;
        },
        30_000,
      );
      assert.equal(short.status, 'pending');
      assert.equal(short.transaction, null);
      assert.match(await (await fetch(service.metricsUrl)).text(), /refund_wallet_short_total\{lacks="gas"\} [1-9]/);
      await setEth(dev.refund_wallet.address, 10n ** 18n);
      const sent = await waitFor(
        'the refund sent once the wallet has gas',
        async () => {
          const refund = (await request(service, 'GET', `/services/${id}/usage`)).body.usage.refund;
          return refund.status === 'sent' && refund;
        },
        60_000,
      );
      assert.equal((await usdcBalance(dev.chain.rpc_url, wallet.address)) - before, BigInt(sent.amount.amount_atomic));
    } finally {
      await setEth(dev.refund_wallet.address, 10n ** 18n);
    }
  });
});
