import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { startRangeLimitedRpc } from './support/rpc-proxy.js';
import { Database } from '../src/store/index.js';
import { request, scratchDir, startService, type Service } from './support/service.js';
import { authorizationOf, decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// A buyer who lies: it signs a payment, sends the order, and then cancels the authorization on chain, or spends its
// nonce on another transfer. authorizationState(payer, nonce) is then true although nothing was paid.

const running: Service[] = [];
const proxies: Array<{ close(): Promise<void> }> = [];
after(async () => {
  await Promise.all([...running.map((s) => s.stop('SIGKILL')), ...proxies.map((p) => p.close())]);
});

/** Reads go through an RPC endpoint that refuses log ranges wider than 3 blocks, as remote providers refuse wide ones. */
async function narrowRpc() {
  const rpc = await startRangeLimitedRpc(3);
  proxies.push(rpc);
  return { rpc, env: { X402_RPC_URL: rpc.url, X402_LOG_WINDOW_BLOCKS: '3' } };
}

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Proof FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};
const PRICE = 270000n;
const elsewhere = '0x000000000000000000000000000000000000dEaD';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(env: Record<string, string>, dataDir?: string) {
  const service = await startService(env, { dataDir });
  running.push(service);
  const dev = await devFile(service);
  return {
    service,
    rpcUrl: dev.chain.rpc_url as string,
    wallet: new TestWallet(dev.buyer.private_key, dev.chain.rpc_url),
  };
}

async function offer(service: Service, wallet: TestWallet, key: string) {
  const ask = await request(service, 'POST', '/orders', { body, headers: { 'idempotency-key': key } });
  assert.equal(ask.status, 402);
  const header = ask.headers.get('payment-required')!;
  const { asset, payTo } = decodePaymentRequiredHeader(header).accepts[0];
  return {
    header,
    asset,
    payTo,
    signature: await wallet.pay(header),
    sellerBefore: await wallet.balanceOf(asset, payTo),
  };
}

function order(service: Service, key: string, signature: string) {
  return request(service, 'POST', '/orders', {
    body,
    headers: { 'idempotency-key': key, 'payment-signature': signature },
  });
}

/** Repeats the paid request until it stops being "in progress" (recovery finishing the order). */
async function settledAnswer(service: Service, key: string, signature: string) {
  for (let i = 0; i < 150; i++) {
    const response = await order(service, key, signature);
    if (!response.body.error?.retryable) return response;
    await sleep(200);
  }
  throw new Error('the order never concluded');
}

async function rpcCall(url: string, method: string, params: unknown[]): Promise<string> {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await answer.json()) as { result: string }).result;
}

/**
 * An order's proof is searched from the height at verify less this margin (REORG_MARGIN_BLOCKS in
 * src/payments/checkout.ts).
 */
const CLAIM_REORG_MARGIN = 5n;

/**
 * One service for the tests that need nothing of their own but distinct idempotency keys: a `serve` start is the
 * costliest step of a test here.
 */
let plain: ReturnType<typeof start> | undefined;
const plainService = () => (plain ??= start({}));

/** One service whose orders wait 1.5 s after the claim, reading the chain through a proxy that allows 3 blocks. */
let paused: Promise<Awaited<ReturnType<typeof start>> & { rpc: Awaited<ReturnType<typeof narrowRpc>>['rpc'] }>;
function pausedBehindNarrowRpc() {
  paused ??= (async () => {
    const { rpc, env: reads } = await narrowRpc();
    // No refund worker: its look-up of an earlier test's failed order (from that order's claim) would be a search
    // from before this test's claim.
    const started = await start({ ...reads, ORDER_PAUSE_AT: 'after_claim:1500', REFUND_INTERVAL_MS: '600000' });
    rpc.setUpstream(started.rpcUrl);
    return { ...started, rpc };
  })();
  return paused;
}

const lies = {
  cancel: { act: (w: TestWallet, signature: string) => w.cancel(signature), reason: /authorization_canceled/ },
  spend: {
    act: (w: TestWallet, signature: string) => w.spendNonceElsewhere(signature, elsewhere, 1n),
    reason: /authorization_spent_elsewhere/,
  },
};

describe('an order is paid only on proof of transfer', () => {
  for (const [lie, { act, reason }] of Object.entries(lies)) {
    test(`${lie} between verify and settle: the order fails unpaid, the agent is told why, nothing is charged`, async () => {
      const { rpc, service, wallet, rpcUrl } = await pausedBehindNarrowRpc();
      // A chain with a past: the proof must be searched from the claim height, not from block 0 (nor from an
      // earlier test's claim on this service).
      await rpcCall(rpcUrl, 'anvil_mine', ['0x40']);
      const claimFloor = BigInt(await rpcCall(rpcUrl, 'eth_blockNumber', [])) - CLAIM_REORG_MARGIN;
      const seen = rpc.ranges.length;
      const paid = await offer(service, wallet, `lie-${lie}`);
      const pending = order(service, `lie-${lie}`, paid.signature);
      await waitUntilClaimed(service, paid.signature); // the order is claimed and waits before settling
      assert.equal(await act(wallet, paid.signature), 'mined', 'the buyer consumed its authorization');

      const response = await pending;
      assert.equal(response.status, 402, JSON.stringify(response.body));
      assert.equal(response.body.error.code, 'payment_failed');
      assert.match(response.body.error.message, reason);
      assert.equal(response.body.service, undefined, 'no stream handed out');
      assert.equal(await wallet.balanceOf(paid.asset, paid.payTo), paid.sellerBefore, 'the seller received nothing');
      assert.equal(rpc.refused, 0, 'no log search wider than the provider allows');
      const ranges = rpc.ranges.slice(seen);
      assert.ok(
        ranges.length >= 2,
        `the search went window by window from the claim height (${ranges.length} windows)`,
      );
      assert.ok(
        ranges.every(([from]) => from >= claimFloor),
        `no search from before the claim at ${claimFloor} (${ranges.map(([f, t]) => `${f}-${t}`)})`,
      );

      const again = await order(service, `lie-${lie}`, paid.signature);
      assert.equal(again.status, 402, 'the same dead authorization never buys the order');
      assert.match(again.body.error.message, reason);

      // The key was released: a real payment with the same key buys the order.
      const honest = await order(service, `lie-${lie}`, await wallet.pay(paid.header));
      assert.equal(honest.status, 200, JSON.stringify(honest.body));
      assert.match(honest.body.order.payment.transaction, /^0x[0-9a-f]{64}$/);
      assert.equal((await wallet.balanceOf(paid.asset, paid.payTo)) - paid.sellerBefore, PRICE);
    });
  }

  test('a cancel racing the order at several delays: either paid in full or not charged at all', async () => {
    const { service, wallet } = await plainService();
    for (const delay of [0, 5, 15, 25, 50, 100]) {
      const paid = await offer(service, wallet, `race-${delay}`);
      const pending = order(service, `race-${delay}`, paid.signature);
      await sleep(delay);
      const cancel = await wallet.cancel(paid.signature);
      const response = await pending;
      const received = (await wallet.balanceOf(paid.asset, paid.payTo)) - paid.sellerBefore;
      if (response.status === 200) {
        assert.equal(received, PRICE, `delay ${delay} ms: a stream handed out must have been paid`);
        assert.equal(cancel, 'reverted');
      } else {
        assert.equal(response.status, 402, `delay ${delay} ms: ${JSON.stringify(response.body)}`);
        assert.equal(received, 0n, `delay ${delay} ms: refused and charged`);
        assert.equal(cancel, 'mined');
      }
    }
  });

  test('a paid order is answered only once the chain state that proves its payment is saved to disk', async () => {
    const { service, wallet } = await plainService();
    // The embedded chain also saves on a 1 s timer: several purchases, each read the moment it is answered.
    for (let i = 0; i < 4; i++) {
      const paid = await offer(service, wallet, `durable-${i}`);
      const response = await order(service, `durable-${i}`, paid.signature);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const journal = (await readFile(join(service.dataDir, 'chain-state.jsonl'), 'utf8')).toLowerCase();
      assert.ok(
        journal.includes(authorizationOf(paid.signature).nonce.toLowerCase()),
        `purchase ${i}: the used nonce is in the saved chain state`,
      );
      assert.ok(
        journal.includes(response.body.order.payment.transaction.toLowerCase()),
        `purchase ${i}: the transfer's log is in the saved chain state`,
      );
    }
  });

  test('an authorization valid for longer than maxTimeoutSeconds is refused before anything is claimed', async () => {
    const { service, wallet } = await plainService();
    const paid = await offer(service, wallet, 'forever');
    const forever = await wallet.payWithValidity(paid.header, 0n, 2n ** 255n);
    const response = await order(service, 'forever', forever);
    assert.equal(response.status, 402, JSON.stringify(response.body));
    assert.equal(response.body.error.code, 'payment_rejected');
    assert.match(response.body.error.message, /validBefore/);
    assert.equal(await wallet.balanceOf(paid.asset, paid.payTo), paid.sellerBefore);
    assert.equal(await wallet.cancel(forever), 'mined', 'the authorization was never used');
  });

  for (const [lie, { reason }] of Object.entries(lies)) {
    test(`${lie} after the claim, then SIGKILL: recovery finds no transfer and fails the order unpaid`, async () => {
      const { revived, rpc, paid } = await bothLiesThenKilled();
      const response = await settledAnswer(revived.service, `kill-${lie}`, paid[lie].signature);
      assert.equal(response.status, 402, JSON.stringify(response.body));
      assert.equal(response.body.error.code, 'payment_failed');
      assert.match(response.body.error.message, reason);
      assert.equal(
        await revived.wallet.balanceOf(paid[lie].asset, paid[lie].payTo),
        paid[lie].sellerBefore,
        'the seller received nothing',
      );
      assert.match(revived.service.output(), /order failed: payment not taken/);
      assert.equal(rpc.refused, 0, 'no log search wider than the provider allows');
    });
  }
});

/**
 * One instance killed with both lies in flight: each order claimed and paused, its authorization then cancelled or
 * spent elsewhere on chain; started again on the same DATA_DIR, whose recovery must fail both unpaid.
 */
let killed: ReturnType<typeof killWithBothLies> | undefined;
const bothLiesThenKilled = () => (killed ??= killWithBothLies());

async function killWithBothLies() {
  const dataDir = await scratchDir('audio-proof-');
  const { rpc, env: reads } = await narrowRpc();
  // Paused long enough to be killed before settling; its own recovery loop does not come round again.
  const doomed = await start(
    { ...reads, ORDER_PAUSE_AT: 'after_claim:20000', ORDER_LEASE_SECONDS: '2', ORDER_RECOVERY_INTERVAL_MS: '600000' },
    dataDir,
  );
  rpc.setUpstream(doomed.rpcUrl);
  const paid: Record<string, Awaited<ReturnType<typeof offer>>> = {};
  const pending: Array<Promise<unknown>> = [];
  for (const lie of Object.keys(lies)) {
    paid[lie] = await offer(doomed.service, doomed.wallet, `kill-${lie}`);
    pending.push(order(doomed.service, `kill-${lie}`, paid[lie].signature).catch(() => undefined));
  }
  for (const [lie, { act }] of Object.entries(lies)) {
    await waitUntilClaimed(doomed.service, paid[lie].signature);
    assert.equal(await act(doomed.wallet, paid[lie].signature), 'mined');
  }
  // The chain's ledger is saved about once a second: wait until the consumed nonces are in it, as a real chain keeps it.
  const nonces = Object.values(paid).map((p) => authorizationOf(p.signature).nonce.toLowerCase());
  for (let i = 0; i < 50; i++) {
    const journal = (await readFile(join(dataDir, 'chain-state.jsonl'), 'utf8')).toLowerCase();
    if (nonces.every((n) => journal.includes(n))) break;
    await sleep(100);
  }
  assert.equal(await doomed.service.stop('SIGKILL'), null);
  await Promise.all(pending);

  const revived = await start({ ...reads, ORDER_LEASE_SECONDS: '1', ORDER_RECOVERY_INTERVAL_MS: '200' }, dataDir);
  rpc.setUpstream(revived.rpcUrl);
  return { revived, rpc, paid };
}

/** Waits (bounded) until the order paid with this signature is claimed: its row saved, waiting to settle. */
async function waitUntilClaimed(service: Service, signature: string): Promise<void> {
  const lock = await serveLock(service);
  const db = new Database(lock.database_url, { max: 1 });
  try {
    const nonce = authorizationOf(signature).nonce;
    for (let i = 0; i < 600; i++) {
      const rows = await db.query("SELECT 1 FROM orders WHERE lower(nonce) = lower($1) AND state = 'settling'", [
        nonce,
      ]);
      if (rows.length === 1) return;
      await sleep(50);
    }
    throw new Error(`the order paid with nonce ${nonce} was not claimed within 30 s`);
  } finally {
    await db.close();
  }
}
