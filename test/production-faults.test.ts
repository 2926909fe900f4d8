import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  agentBuysStream,
  limiter,
  ROLES,
  SMALL_STREAM,
  startChain,
  startFacilitator,
  startFacilitatorSwitch,
  startProduction,
  tallyOnChain,
  type AgentPurchase,
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

async function runFault(
  { service, switchTo, payTo }: Deployment,
  fault: string,
  buyer: (typeof ROLES.buyers)[number],
): Promise<{ counts: Awaited<ReturnType<typeof tallyOnChain>>; purchases: AgentPurchase[]; settles: number }> {
  const facilitator = await startFacilitator(chain.rpcUrl, { fault });
  cleanups.push(() => facilitator.stop());
  switchTo(facilitator.url);
  const wallet = new TestWallet(buyer.privateKey, chain.rpcUrl);
  const sellerBefore = await chain.chain.usdcBalance(payTo);
  const slot = limiter(CONCURRENCY);
  const started = Date.now();
  const purchases = await Promise.all(Array.from({ length: PURCHASES }, () => agentBuysStream(service, wallet, slot)));
  const bought = Date.now();
  const counts = await tallyOnChain(service, chain, purchases);
  await facilitator.stop();
  const settles = facilitator
    .output()
    .split('\n')
    .filter((line) => line.includes('"msg":"settle"')).length;
  if (process.env.DEBUG_FAULTS) console.log(facilitator.output(), service.output());
  console.log(
    `fault ${fault}: purchases ${counts.purchases}, charged ${counts.charged}, delivered ${counts.delivered}, refunded ${counts.refunded}, double charges ${counts.doubleCharges}, paid and not delivered ${counts.paidNotDelivered} (settle calls ${settles}; ${bought - started} ms buying, ${Date.now() - bought} ms settling)`,
  );
  const received = (await chain.chain.usdcBalance(payTo)) - sellerBefore;
  assert.equal(
    received,
    PRICE * BigInt(counts.charged),
    `${fault}: the seller received what the chain says was charged`,
  );
  assert.equal(counts.doubleCharges, 0, `${fault}: nobody is charged twice`);
  assert.equal(counts.paidNotDelivered, 0, `${fault}: nothing paid stays undelivered and unrefunded`);
  return { counts, purchases, settles };
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

  test('a settle that waits for its receipt longer than an order lease: recovery races it, the chain decides', async () => {
    // The facilitator's own 30 s receipt wait, the service's default timeout (15 s), 3 s leases: recovery sends the
    // payment again while the first settle still waits; that second one is refused (its transfer reverts).
    const deployment = await productionBehindSwitch({ X402_MAX_TIMEOUT_SECONDS: '30' });
    const fault = 'slow-settle:4000';
    const { counts, purchases, settles } = await runFault(deployment, fault, ROLES.buyers[0]);
    const undelivered = purchases.filter((p) => p.final.status !== 200).map((p) => [p.answers, p.final.body]);
    assert.equal(counts.delivered, PURCHASES, `${fault}: every purchase delivered ${JSON.stringify(undelivered)}`);
    assert.equal(counts.charged, PURCHASES, `${fault}: each charged once`);
    assert.ok(
      purchases.every((p) => p.answers.every((a) => a.code !== 'payment_failed')),
      `${fault}: nobody was told nothing was charged`,
    );
    assert.ok(settles > PURCHASES, `${fault}: recovery sent payments again while their first settle waited`);
    const verify = await deployment.service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stderr);
  });
});
