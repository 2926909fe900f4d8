import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { buy } from './support/purchase.js';
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
  type Chain,
} from './support/production.js';
import { request, scratchDir, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';

/**
 * Facilitators as production offers them: one that does not list our network, several in order with
 * one killed mid-run, one that requires an API-key JWT, one that hangs while the service is asked to stop. Purchases
 * are counted on the token: nothing charged twice, every settled payment delivered.
 */

const PRICE = 270_000n;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

async function production(facilitatorUrl: string, env: Record<string, string> = {}) {
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const service = await startProduction(chain, facilitatorUrl, env, payTo);
  cleanups.push(() => service.stop());
  return { service, payTo };
}

async function facilitator(options: Parameters<typeof startFacilitator>[1] = {}) {
  const started = await startFacilitator(chain.rpcUrl, options);
  cleanups.push(() => started.stop());
  return started;
}

async function healthDetails(service: Service): Promise<any> {
  const answer = await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'));
  return answer.json();
}

/** Polls `probe` until it returns true (or the time runs out), returning its last value. */
async function until(probe: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await sleep(250);
  }
}

/**
 * A facilitator behind a proxy that notes the payment (payer:nonce) of every settlement reaching it; with `hang`, its
 * settle never answers and never settles (a hung connection in front of it), /supported and /verify go through.
 */
async function facilitatorProxy(upstream: string, options: { hang?: boolean } = {}) {
  const held = new Set<ServerResponse>();
  const settled: string[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (req.url === '/settle') {
      const { authorization } = JSON.parse(Buffer.concat(chunks).toString()).paymentPayload.payload;
      settled.push(`${authorization.from.toLowerCase()}:${authorization.nonce}`);
      if (options.hang) return void held.add(res);
    }
    const answer = await fetch(`${upstream}${req.url}`, {
      method: req.method,
      headers: { 'content-type': 'application/json' },
      ...(req.method === 'POST' && { body: Buffer.concat(chunks) }),
    }).catch(() => undefined);
    if (!answer) return void res.destroy();
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const res of held) res.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, settled, settles: () => settled.length };
}

// The tests wait on time (authorizations expiring, timeouts) more than they compute: they run side by side.
describe('facilitators as production offers them', { concurrency: 5 }, () => {
  test('/supported without our network: 503 saying why, health degraded, and fixed without a restart', async () => {
    const facilitatorSwitch = await startFacilitatorSwitch();
    cleanups.push(() => facilitatorSwitch.close());
    const wrong = await facilitator({ fault: 'unsupported-network' });
    facilitatorSwitch.setUpstream(wrong.url);
    const { service } = await production(facilitatorSwitch.url);

    const unpaid = await request(service, 'POST', '/orders', {
      body: SMALL_STREAM,
      headers: { 'idempotency-key': crypto.randomUUID() },
    });
    assert.equal(unpaid.status, 503, JSON.stringify(unpaid.body));
    assert.equal(unpaid.body.error.code, 'payment_network_unavailable');
    assert.equal(unpaid.body.error.retryable, true);
    assert.match(unpaid.body.error.message, /does not list exact on eip155:8453/);
    assert.doesNotMatch(JSON.stringify(unpaid.body), /at .*\.(ts|js):\d+/, 'no stack trace');

    const health = await request(service, 'GET', '/health');
    assert.equal(health.body.status, 'degraded');
    assert.equal(health.body.checks.facilitator.ok, false);
    assert.equal(health.body.machine_payment.available, false);
    const details = await healthDetails(service);
    assert.match(
      details.checks.facilitator.reason,
      /does not list exact on eip155:8453 \(it lists exact on eip155:1\)/,
    );
    const availability = await request(service, 'GET', '/availability');
    assert.equal(availability.body.agent_checkout.available, false);
    assert.match(availability.body.agent_checkout.reason, /does not list exact on eip155:8453/);
    assert.ok(availability.body.products.filter((p: any) => p.agent_orderable).every((p: any) => !p.available_now));

    // The operator fixes the facilitator: no restart of the service.
    const fixed = await facilitator();
    facilitatorSwitch.setUpstream(fixed.url);
    const healed = await until(async () => {
      const answer = await request(service, 'POST', '/orders', {
        body: SMALL_STREAM,
        headers: { 'idempotency-key': crypto.randomUUID() },
      });
      return answer.status === 402;
    }, 15_000);
    assert.ok(healed, 'orders get their 402 again once the facilitator lists our network');
    const wallet = new TestWallet(ROLES.buyers[0].privateKey, chain.rpcUrl);
    const bought = await buy(service, wallet, SMALL_STREAM);
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    assert.ok(
      await until(async () => (await request(service, 'GET', '/health')).body.status === 'ok', 10_000),
      'health ok again',
    );
    assert.equal((await request(service, 'GET', '/availability')).body.agent_checkout.available, true);
  });

  test('an API-key JWT per request: refused without it (health says why), paid with it', async () => {
    const dir = await scratchDir('audio-facilitator-auth-');
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const publicFile = join(dir, 'public.pem');
    const keyFile = join(dir, 'cdp_api_key.json');
    await writeFile(publicFile, publicKey.export({ type: 'spki', format: 'pem' }));
    const name = 'organizations/0000/apiKeys/test-key';
    const pem = privateKey.export({ type: 'sec1', format: 'pem' }).toString();
    await writeFile(keyFile, JSON.stringify({ name, privateKey: pem }), { mode: 0o600 });
    const guarded = await facilitator({ env: { FACILITATOR_AUTH_PUBLIC_KEY_FILE: publicFile } });

    const without = await production(guarded.url);
    const details = await healthDetails(without.service);
    assert.equal(details.status, 'degraded');
    assert.match(details.checks.facilitator.reason, /401.*no bearer token/);
    const refused = await request(without.service, 'POST', '/orders', {
      body: SMALL_STREAM,
      headers: { 'idempotency-key': crypto.randomUUID() },
    });
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.match(refused.body.error.message, /401/);
    await without.service.stop();

    const withKey = await production(guarded.url, { X402_FACILITATOR_AUTH_KEY_FILE: keyFile });
    const wallet = new TestWallet(ROLES.buyers[1].privateKey, chain.rpcUrl);
    const before = await chain.chain.usdcBalance(withKey.payTo);
    const bought = await buy(withKey.service, wallet, SMALL_STREAM);
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    assert.equal((await chain.chain.usdcBalance(withKey.payTo)) - before, PRICE);
    assert.equal((await healthDetails(withKey.service)).checks.facilitator.ok, true);
    assert.doesNotMatch(guarded.output(), /"path":"\/settle".*request refused/, 'every call carried a valid token');
  });

  test('the first killed mid-run: the next takes over, nothing charged twice, every settled payment delivered', async () => {
    const first = await facilitator();
    const second = await facilitator();
    const { service, payTo } = await production(`${first.url},${second.url}`, { X402_FACILITATOR_TIMEOUT_MS: '1500' });
    const wallet = new TestWallet(ROLES.buyers[0].privateKey, chain.rpcUrl);
    const sellerBefore = await chain.chain.usdcBalance(payTo);
    const slot = limiter(4);
    let done = 0;
    const purchases = Promise.all(
      Array.from({ length: 20 }, () =>
        agentBuysStream(service, wallet, slot).finally(() => {
          done++;
        }),
      ),
    );
    assert.ok(await until(async () => done >= 6, 30_000));
    first.process.kill('SIGKILL');
    const bought = await purchases;
    const counts = await tallyOnChain(service, chain, bought);
    console.log(
      `two facilitators, the first killed after ${done >= 6 ? 6 : done} purchases: purchases ${counts.purchases}, charged ${counts.charged}, delivered ${counts.delivered}, refunded ${counts.refunded}, double charges ${counts.doubleCharges}, paid and not delivered ${counts.paidNotDelivered}`,
    );
    assert.equal((await chain.chain.usdcBalance(payTo)) - sellerBefore, PRICE * BigInt(counts.charged));
    assert.equal(counts.doubleCharges, 0);
    assert.equal(counts.paidNotDelivered, 0);
    assert.equal(
      counts.delivered,
      20,
      JSON.stringify(bought.filter((p) => p.final.status !== 200).map((p) => p.answers)),
    );
    assert.ok(/"msg":"settle"/.test(second.output()), 'the second facilitator settled after the first was gone');
    const verify = await service.cli(['audit', 'verify']);
    assert.equal(verify.code, 0, verify.stderr);
  });

  test('a settlement whose outcome is unknown at one facilitator is sent again only to that one', async () => {
    // The first answers verify, and its settle hangs without settling: outcomes unknown (timeout). Recovery may send
    // those payments again only to it; they fail once expired unused, and their agents pay again, through the second.
    const real = await facilitator();
    const hanging = await facilitatorProxy(real.url, { hang: true });
    const spare = await facilitatorProxy(real.url);
    // Authorizations valid for 30 s: recovery sends the hung ones again (after their 3 s lease) while they can be used.
    // A timeout of 3 s, not less: a verify slower than the timeout on a loaded machine would mark the first failed,
    // and every payment would go to the second (nothing would test the rule).
    const { service, payTo } = await production(`${hanging.url},${spare.url}`, {
      X402_FACILITATOR_TIMEOUT_MS: '3000',
      // The first's verify answers (only its settle hangs): on a loaded machine it may take past 3 s.
      X402_FACILITATOR_VERIFY_TIMEOUT_MS: '15000',
      X402_MAX_TIMEOUT_SECONDS: '30',
    });
    const wallet = new TestWallet(ROLES.buyers[1].privateKey, chain.rpcUrl);
    const sellerBefore = await chain.chain.usdcBalance(payTo);
    const slot = limiter(4);
    const bought = await Promise.all(Array.from({ length: 8 }, () => agentBuysStream(service, wallet, slot)));
    const counts = await tallyOnChain(service, chain, bought);
    const both = hanging.settled.filter((payment) => spare.settled.includes(payment));
    console.log(
      `a hanging first, a spare second: purchases ${counts.purchases}, charged ${counts.charged}, delivered ${counts.delivered}, double charges ${counts.doubleCharges}; settlements sent to the first ${hanging.settles()}, to the second ${spare.settles()}, to both ${both.length}`,
    );
    assert.ok(hanging.settles() > 0, 'payments were sent to the first facilitator (its verify answered in time)');
    assert.ok(hanging.settles() > new Set(hanging.settled).size, 'recovery sent hung payments again (to the first)');
    assert.deepEqual(both, [], 'no payment was sent to both facilitators');
    assert.equal(counts.doubleCharges, 0);
    assert.equal(counts.paidNotDelivered, 0);
    assert.equal(
      counts.delivered,
      8,
      JSON.stringify(bought.filter((p) => p.final.status !== 200).map((p) => p.answers)),
    );
    assert.equal((await chain.chain.usdcBalance(payTo)) - sellerBefore, PRICE * BigInt(counts.charged));
  });

  test('recovery runs hung orders side by side, and SIGTERM stops within seconds (default facilitator timeout)', async () => {
    const hang = await facilitatorProxy((await facilitator()).url, { hang: true });
    // Authorizations valid for a minute: recovery sends a settlement again only while it can still be used.
    const { service } = await production(hang.url, { X402_MAX_TIMEOUT_SECONDS: '60' });
    const wallet = new TestWallet(ROLES.buyers[1].privateKey, chain.rpcUrl);
    // Two purchases hang in their requests (15 s, the default timeout); once their leases run out (3 s) recovery
    // sends both again, side by side, and they hang there too.
    const hung = [buy(service, wallet, SMALL_STREAM), buy(service, wallet, SMALL_STREAM)].map((p) =>
      p.catch((e: Error) => ({ status: 0, body: { error: e.message } })),
    );
    // One after the other, the second resend would wait out the first's 15 s hang: before 15 s both came side by side.
    const both = await until(async () => hang.settles() >= 4, 14_000);
    assert.ok(both, `recovery sent both hung orders again at once (${hang.settles()} settlements reached it)`);
    await service.stop('SIGTERM');
    const exitedAt = Date.now();
    // From serve's own line on the signal to its exit: the harness reads /proc for the CPU figures before it signals,
    // which took seconds on a loaded CI (serve logged 0.9 s, the wall around stop() was 5.4 s).
    const stopping = service
      .output()
      .split('\n')
      .find((line) => line.includes('"msg":"stopping"'));
    assert.ok(stopping, 'serve logged that it was stopping');
    const seconds = (exitedAt - Date.parse(JSON.parse(stopping).time)) / 1000;
    console.log(`SIGTERM with ${hang.settles()} hung settles in flight: stopped in ${seconds.toFixed(1)} s`);
    if (seconds >= 5) console.log(service.output().split('\n').slice(-40).join('\n'));
    assert.ok(seconds < 5, `stopped in ${seconds.toFixed(1)} s`);
    const answers = await Promise.all(hung);
    for (const answer of answers) assert.notEqual(answer.status, 500, JSON.stringify(answer.body));
  });
});
