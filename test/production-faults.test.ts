import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { authorizationOf } from './support/wallet.js';
import { buy } from './support/purchase.js';
import {
  orderWhen,
  ROLES,
  SMALL_STREAM,
  startChain,
  startFacilitator,
  startFacilitatorSwitch,
  startProduction,
  type Chain,
} from './support/production.js';
import { request, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';

/**
 * Production mode against facilitators over HTTP that misbehave as production ones do. Each fault is bought through
 * many times by agents that follow what each answer tells them; what happened is then read on the token: who paid,
 * what was delivered, what was refunded. Nothing may be charged twice, nothing paid may stay undelivered.
 */

const PRICE = 270_000n;
const PURCHASES = 20;
const CONCURRENCY = 4;

let chain: Chain;
const cleanups: Array<() => Promise<unknown>> = [];
before(async () => {
  chain = await startChain();
  for (const buyer of ROLES.buyers) await chain.chain.ensureFunded(buyer.address, 100_000_000n);
});
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await chain.stop();
});

/** At most CONCURRENCY requests in flight: the agents' waits between requests hold no place. */
function limiter(places: number) {
  let free = places;
  const queue: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (free === 0) await new Promise<void>((resolve) => queue.push(resolve));
    else free--;
    try {
      return await work();
    } finally {
      const next = queue.shift();
      if (next) next();
      else free++;
    }
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Purchase {
  key: string;
  signatures: string[];
  orderIds: Set<string>;
  answers: Array<{ status: number; code?: string }>;
  final: { status: number; headers: Headers; body: any };
}

/**
 * An agent buying one stream and doing what each answer says: the same request again (same payment, same key) while
 * the outcome is unknown or the network did not answer; a new payment once — only once — when told nothing was
 * charged (the payment failed, or it was refused, e.g. because it expired while the network was down).
 */
async function agentBuys(service: Service, wallet: TestWallet, slot: ReturnType<typeof limiter>): Promise<Purchase> {
  const purchase: Purchase = { key: randomUUID(), signatures: [], orderIds: new Set(), answers: [], final: undefined! };
  const note = (answer: { status: number; headers: Headers; body: any }) => {
    const orderId = answer.body?.order?.id ?? answer.body?.error?.details?.[0]?.order_id;
    if (orderId) purchase.orderIds.add(orderId);
    purchase.answers.push({ status: answer.status, code: answer.body?.error?.code });
    purchase.final = answer;
    return answer;
  };
  let answer = note(await slot(() => buy(service, wallet, SMALL_STREAM, purchase.key, purchase.signatures)));
  let paidAgain = false;
  for (let round = 0; round < 120 && answer.status !== 200; round++) {
    const code = answer.body?.error?.code;
    if ((code === 'payment_failed' || code === 'payment_rejected') && !paidAgain) {
      paidAgain = true;
      answer = note(await slot(() => buy(service, wallet, SMALL_STREAM, purchase.key, purchase.signatures)));
    } else if (['settlement_pending', 'payment_network_unavailable', 'idempotency_in_progress'].includes(code)) {
      // As Retry-After says, shortened: the authorizations of these tests are valid for 10 s only.
      await sleep(Math.min(Number(answer.headers.get('retry-after') ?? 1), 2) * 1000);
      answer = note(await slot(() => resend(service, purchase)));
    } else break;
  }
  return purchase;
}

/** The same request with the same payment and key, as an agent retries after a 503. */
function resend(service: Service, purchase: Purchase) {
  return request(service, 'POST', '/orders', {
    body: SMALL_STREAM,
    headers: { 'idempotency-key': purchase.key, 'payment-signature': purchase.signatures.at(-1)! },
  });
}

interface Tally {
  fault: string;
  purchases: number;
  charged: number;
  delivered: number;
  refunded: number;
  doubleCharges: number;
  paidNotDelivered: number;
}

/** What the chain and the orders say of each purchase, once no order is left settling or provisioning. */
async function tally(service: Service, fault: string, purchases: Purchase[]): Promise<Tally> {
  const orderIds = purchases.flatMap((p) => [...p.orderIds]);
  for (const id of orderIds) {
    await orderWhen(service, id, (state) => !['settling', 'provisioning', 'claimed'].includes(state), 60_000);
  }
  const counts: Tally = {
    fault,
    purchases: purchases.length,
    charged: 0,
    delivered: 0,
    refunded: 0,
    doubleCharges: 0,
    paidNotDelivered: 0,
  };
  for (const p of purchases) {
    let charged = 0;
    for (const signature of p.signatures) {
      const { nonce } = authorizationOf(signature);
      if (await chain.chain.authorizationState(authorizationOf(signature).from, nonce)) charged++;
    }
    const states = await Promise.all(
      [...p.orderIds].map(async (id) => (await request(service, 'GET', `/orders/${id}`)).body.order.status as string),
    );
    const refunded = states.filter((s) => s === 'refunded').length;
    const delivered = p.final.status === 200 ? 1 : 0;
    counts.charged += charged;
    counts.refunded += refunded;
    counts.delivered += delivered;
    if (charged - refunded > delivered) {
      if (delivered) counts.doubleCharges++;
      else counts.paidNotDelivered++;
    }
  }
  return counts;
}

async function runFault(
  { service, switchTo, payTo }: Deployment,
  fault: string,
  buyer: (typeof ROLES.buyers)[number],
): Promise<{ counts: Tally; purchases: Purchase[] }> {
  const facilitator = await startFacilitator(chain.rpcUrl, { fault });
  cleanups.push(() => facilitator.stop());
  switchTo(facilitator.url);
  const wallet = new TestWallet(buyer.privateKey, chain.rpcUrl);
  const sellerBefore = await chain.chain.usdcBalance(payTo);
  const slot = limiter(CONCURRENCY);
  const started = Date.now();
  const purchases = await Promise.all(Array.from({ length: PURCHASES }, () => agentBuys(service, wallet, slot)));
  const bought = Date.now();
  const counts = await tally(service, fault, purchases);
  await facilitator.stop();
  if (process.env.DEBUG_FAULTS) console.log(facilitator.output(), service.output());
  console.log(
    `fault ${fault}: purchases ${counts.purchases}, charged ${counts.charged}, delivered ${counts.delivered}, refunded ${counts.refunded}, double charges ${counts.doubleCharges}, paid and not delivered ${counts.paidNotDelivered} (${bought - started} ms buying, ${Date.now() - bought} ms settling)`,
  );
  const received = (await chain.chain.usdcBalance(payTo)) - sellerBefore;
  assert.equal(
    received,
    PRICE * BigInt(counts.charged),
    `${fault}: the seller received what the chain says was charged`,
  );
  assert.equal(counts.doubleCharges, 0, `${fault}: nobody is charged twice`);
  assert.equal(counts.paidNotDelivered, 0, `${fault}: nothing paid stays undelivered and unrefunded`);
  return { counts, purchases };
}

interface Deployment {
  service: Service;
  switchTo(url: string): void;
  /** Its own seller address: what it received is read on the token. */
  payTo: Address;
}

async function productionBehindSwitch(env: Record<string, string> = {}): Promise<Deployment> {
  const facilitatorSwitch = await startFacilitatorSwitch();
  cleanups.push(() => facilitatorSwitch.close());
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const service = await startProduction(chain, facilitatorSwitch.url, env, payTo);
  cleanups.push(() => service.stop());
  return { service, switchTo: facilitatorSwitch.setUpstream, payTo };
}

describe('faults of a facilitator over HTTP, 20 purchases each, 4 at a time', { concurrency: 2 }, () => {
  // Two services side by side, one per buyer wallet and facilitator gas wallet: the slow faults wait on expiry.
  test('answers that arrive late or not at all: every purchase is delivered, charged once', async () => {
    const deployment = await productionBehindSwitch({ X402_FACILITATOR_TIMEOUT_MS: '1500' });
    const buyer = ROLES.buyers[0];
    for (const fault of ['pending-200:2500', 'pending-500:2500', 'settle-hang', 'down:3000']) {
      const { counts, purchases } = await runFault(deployment, fault, buyer);
      const undelivered = purchases.filter((p) => p.final.status !== 200).map((p) => [p.answers, p.final.body]);
      assert.equal(counts.delivered, PURCHASES, `${fault}: every purchase delivered ${JSON.stringify(undelivered)}`);
      assert.equal(counts.charged, PURCHASES, `${fault}: each charged once`);
      if (fault.startsWith('pending')) {
        const told = purchases.flatMap((p) => p.answers).filter((a) => a.code === 'settlement_pending').length;
        assert.ok(told >= PURCHASES, `${fault}: each agent was told the settlement is pending (${told})`);
        assert.ok(
          purchases.every((p) => p.answers.every((a) => a.code !== 'payment_failed')),
          `${fault}: nobody was told nothing was charged`,
        );
      }
    }
    const verify = await deployment.service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stderr);
  });

  test('refusals the chain confirms: nothing charged, and the agent is told so only once the authorization expired', async () => {
    const deployment = await productionBehindSwitch();
    const buyer = ROLES.buyers[1];
    for (const fault of ['settle-refused', 'wrong-transaction']) {
      const { counts, purchases } = await runFault(deployment, fault, buyer);
      assert.equal(counts.charged, 0, `${fault}: nothing charged`);
      for (const p of purchases.filter((p) => p.final.status !== 200)) {
        assert.equal(p.final.body.error.code, 'payment_failed', JSON.stringify(p.final.body));
        assert.match(p.final.body.error.message, /expired unused on chain/);
        const states = await Promise.all(
          [...p.orderIds].map(
            async (id) => (await request(deployment.service, 'GET', `/orders/${id}`)).body.order.status,
          ),
        );
        assert.ok(
          states.every((s) => s === 'failed'),
          states.join(),
        );
      }
    }
    const verify = await deployment.service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stderr);
  });
});
