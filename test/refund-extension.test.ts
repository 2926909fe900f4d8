import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { verifyReceiptSignatureJWS } from '@x402/extensions/offer-receipt';
import { privateKeyToAccount } from 'viem/accounts';
import { DEV_ACCOUNTS } from '../src/chain/index.js';
import { Database } from '../src/store/index.js';
import { buy } from './support/purchase.js';
import { mintUsdc, usdcBalance } from './support/refund-chain.js';
import { request, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { chainOwnerDevFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// The typed data as docs/api.md gives it to a client, written out here apart from the server's own copy.
const TYPES = {
  RefundRequest: [
    { name: 'x402Version', type: 'uint256' },
    { name: 'network', type: 'string' },
    { name: 'txHash', type: 'bytes32' },
    { name: 'paymentId', type: 'string' },
    { name: 'amount', type: 'uint256' },
    { name: 'reason', type: 'string' },
    { name: 'reasonDetail', type: 'string' },
    { name: 'refundTo', type: 'address' },
    { name: 'idempotencyKey', type: 'string' },
    { name: 'validBefore', type: 'uint256' },
  ],
} as const;

type Account = ReturnType<typeof privateKeyToAccount>;

/** A refund request in the proposal's form, signed (EIP-712) by `signer`. */
async function signedRequest(
  signer: Account,
  fields: { txHash: string; amount: string; validBefore?: number; key?: string },
): Promise<Record<string, unknown>> {
  const request = {
    x402Version: 2,
    paymentReference: { txHash: fields.txHash, network: 'eip155:8453' },
    amount: fields.amount,
    reason: 'customer_request',
    idempotencyKey: fields.key ?? randomUUID(),
    ...(fields.validBefore !== undefined && { validBefore: fields.validBefore }),
  };
  const payerSignature = await signer.signTypedData({
    domain: { name: 'x402 refund request', version: '1', chainId: 8453 },
    types: TYPES,
    primaryType: 'RefundRequest',
    message: {
      x402Version: 2n,
      network: 'eip155:8453',
      txHash: fields.txHash as `0x${string}`,
      paymentId: '',
      amount: BigInt(fields.amount),
      reason: 'customer_request',
      reasonDetail: '',
      refundTo: '0x0000000000000000000000000000000000000000',
      idempotencyKey: request.idempotencyKey,
      validBefore: BigInt(fields.validBefore ?? 0),
    },
  });
  return { ...request, payerSignature };
}

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Refund Request FM',
  parameters: { duration_hours: 10, max_listeners: 2, bitrate_kbps: 64 },
};

let service: Service;
let rpc: string;
let refundWallet: string;
let db: Database;
let payer: Account;
let stranger: Account;
let wallet: TestWallet;
before(async () => {
  service = await startService({ REFUND_INTERVAL_MS: '200' });
  const dev = await chainOwnerDevFile(service);
  rpc = dev.chain.rpc_url;
  refundWallet = dev.refund_wallet.address;
  db = new Database((await serveLock(service)).database_url);
  // A payer of its own that nothing tops up, so that its balance shows exactly what moved.
  payer = privateKeyToAccount(DEV_ACCOUNTS[6].privateKey);
  stranger = privateKeyToAccount(DEV_ACCOUNTS[7].privateKey);
  await mintUsdc(rpc, payer.address, 5_000_000n);
  wallet = new TestWallet(DEV_ACCOUNTS[6].privateKey, rpc);
});
after(async () => {
  await db?.close();
  await service?.stop();
});

const balances = () => Promise.all([usdcBalance(rpc, payer.address), usdcBalance(rpc, refundWallet)]);
const refundRequest = (payload: unknown) => request(service, 'POST', '/x402/refund', { body: payload, auth: false });

describe('the 402s advertise refund terms in the form of the x402 refund extension proposal', () => {
  test('an order 402 and an extension 402 carry extensions.refund with the endpoint and the hours paid', async () => {
    const asked = await request(service, 'POST', '/orders', { body, headers: { 'idempotency-key': randomUUID() } });
    assert.equal(asked.status, 402);
    const required = decodePaymentRequiredHeader(asked.headers.get('payment-required')!);
    const refund = required.extensions?.refund as { info: Record<string, unknown>; schema: { required: string[] } };
    assert.deepEqual(refund.info, {
      refundEndpoint: `${service.baseUrl}/x402/refund`,
      windowSeconds: 36_000,
      partialRefunds: true,
    });
    assert.deepEqual(refund.schema.required, ['refundEndpoint', 'windowSeconds', 'partialRefunds']);
    assert.ok(required.extensions?.['offer-receipt'] && required.extensions?.bazaar, 'the other extensions stay');

    const ordered = await buy(service, wallet, { ...body, station_name: 'Extended FM' });
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    const extend = await request(service, 'POST', `/services/${ordered.body.service.service_id}/extend`, {
      body: { duration_hours: 3 },
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(extend.status, 402, JSON.stringify(extend.body));
    const extension = decodePaymentRequiredHeader(extend.headers.get('payment-required')!);
    assert.equal((extension.extensions?.refund as { info: { windowSeconds: number } }).info.windowSeconds, 10_800);
  });
});

describe('POST /x402/refund: a payer-signed request stops the service and refunds on chain', () => {
  let ordered: any;
  let txHash: string;

  before(async () => {
    ordered = await buy(service, wallet, body);
    assert.equal(ordered.status, 200, JSON.stringify(ordered.body));
    txHash = ordered.body.order.payment.transaction;
    assert.match(txHash, /^0x[0-9a-f]{64}$/);
  });

  test("another wallet's request, a tampered one, an expired one and an unknown payment are denied; nothing moves", async () => {
    const before = await balances();
    const theirs = await refundRequest(await signedRequest(stranger, { txHash, amount: '100000' }));
    assert.equal(theirs.status, 403, JSON.stringify(theirs.body));
    assert.equal(theirs.body.status, 'denied');
    assert.equal(theirs.body.denialReason, 'not_payer');
    assert.equal(theirs.body.ok, false);
    assert.equal(theirs.body.error.code, 'refund_not_payer');
    assert.match(theirs.body.error.message, new RegExp(`made by ${stranger.address}`));

    const tampered = await signedRequest(payer, { txHash, amount: '100000' });
    const forged = await refundRequest({ ...tampered, amount: '450000' });
    assert.equal(forged.status, 403, JSON.stringify(forged.body));
    assert.equal(forged.body.denialReason, 'not_payer');

    const expired = await refundRequest(
      await signedRequest(payer, { txHash, amount: '100000', validBefore: Math.floor(Date.now() / 1000) - 5 }),
    );
    assert.equal(expired.status, 403, JSON.stringify(expired.body));
    assert.equal(expired.body.denialReason, 'policy_denied');
    assert.match(expired.body.error.message, /expired/);

    const unknown = await refundRequest(await signedRequest(payer, { txHash: `0x${'ab'.repeat(32)}`, amount: '1' }));
    assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
    assert.equal(unknown.body.denialReason, 'unknown_payment');

    const tooMuch = await refundRequest(await signedRequest(payer, { txHash, amount: '450001' }));
    assert.equal(tooMuch.status, 409, JSON.stringify(tooMuch.body));
    assert.equal(tooMuch.body.denialReason, 'amount_exceeds_settled');

    const malformed = await refundRequest({ x402Version: 2, amount: '1' });
    assert.equal(malformed.status, 422, JSON.stringify(malformed.body));

    const status = await request(service, 'GET', `/services/${ordered.body.service.service_id}`);
    assert.equal(status.body.service.status, 'active', 'the service still runs');
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(await balances(), before, 'nothing moved');
  });

  test('the payer gets executed (after pending), the amount on chain, a signed receipt; a replay is the same', async () => {
    const before = await balances();
    const signed = await signedRequest(payer, { txHash, amount: '450000' });
    const first = await refundRequest(signed);
    assert.ok([200, 202].includes(first.status), JSON.stringify(first.body));
    assert.ok(['executed', 'pending'].includes(first.body.status));
    assert.equal(first.body.refund.reason, 'stopped');
    assert.equal(first.body.service_id, ordered.body.service.service_id);
    const key = signed.idempotencyKey as string;
    const done = await waitFor(
      'the refund executed',
      async () => {
        const polled = await request(service, 'GET', `/x402/refund/${key}`, { auth: false });
        return polled.status === 200 && polled.body.status === 'executed' && polled.body;
      },
      30_000,
    );
    // 0.45 USDC for 10 hours, stopped within seconds: the 0.25 base fee is kept, nearly all the 10 h at 0.02 come back.
    const amount = BigInt(done.amount);
    assert.ok(amount > 199_000n && amount < 200_000n, String(amount));
    assert.equal(done.amount, first.body.amount, 'the amount was known at once');
    assert.equal(done.refundTxHash, done.refund.transaction);
    const after = await balances();
    assert.equal(after[0] - before[0], amount, 'the payer got the amount on chain');
    assert.equal(before[1] - after[1], amount, 'from the refund wallet');
    const receipt = (await verifyReceiptSignatureJWS(done.refundReceipt)) as unknown as Record<string, unknown>;
    assert.equal(receipt.transaction, done.refundTxHash);
    assert.equal(receipt.amount, done.amount);
    assert.equal(receipt.payer, payer.address);

    const stopped = await request(service, 'GET', `/services/${ordered.body.service.service_id}/usage`);
    assert.equal(stopped.body.usage.ended.reason, 'stopped', 'the same stop as POST /services/{id}/stop');
    assert.equal(stopped.body.usage.refund.id, done.refund.id);

    const replay = await refundRequest(signed);
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.equal(replay.body.idempotent_replay, true);
    assert.equal(replay.body.refundTxHash, done.refundTxHash);
    assert.equal(replay.body.amount, done.amount);
    const reused = await refundRequest({ ...signed, reasonDetail: 'another request' });
    assert.equal(reused.status, 409, JSON.stringify(reused.body));
    assert.equal(reused.body.error.code, 'idempotency_key_reused');
    const [{ count }] = await db.query<{ count: string }>(
      'SELECT count(*)::text AS count FROM refunds WHERE service_id = $1',
      [ordered.body.service.service_id],
    );
    assert.equal(count, '1', 'one refund');
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(await balances(), after, 'no second transfer');
  });

  test('a request after the paid time is over is denied outside_window, and nothing moves', async () => {
    const late = await buy(service, wallet, { ...body, station_name: 'Late FM' });
    assert.equal(late.status, 200, JSON.stringify(late.body));
    await db.query("UPDATE services SET expires_at = now() - interval '1 minute' WHERE id = $1", [
      late.body.service.service_id,
    ]);
    const before = await balances();
    const denied = await refundRequest(
      await signedRequest(payer, { txHash: late.body.order.payment.transaction, amount: '100000' }),
    );
    assert.equal(denied.status, 409, JSON.stringify(denied.body));
    assert.equal(denied.body.denialReason, 'outside_window');
    const again = await request(service, 'GET', `/x402/refund/${denied.body.idempotencyKey}`, { auth: false });
    assert.equal(again.status, 409);
    assert.equal(again.body.denialReason, 'outside_window');
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(await balances(), before, 'nothing moved');
  });
});
