import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPublicClient, http, parseAbi, parseEventLogs } from 'viem';
import { startEmbeddedChain, type EmbeddedChain } from '../src/chain/index.js';
import { freePort, startEmbeddedPostgres, type RunningPostgres } from '../src/store/index.js';
import { auditCommand } from './support/audit-command.js';
import { request, roomyCatalog, scratchDir, startService, type Service } from './support/service.js';
import { waitFor } from './support/streaming.js';
import { copyTemplateCluster } from './support/template-data-dir.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

const cleanup: (() => Promise<unknown>)[] = [];
/** These tests drive load from one address; the per-client rate limits are tested elsewhere. */
const unlimited = { RATE_LIMIT_PER_IP: '0', RATE_LIMIT_PER_KEY: '0' };
after(async () => {
  for (const step of cleanup.reverse()) await step().catch(() => {});
});

const instant = { product_id: 'instant-stream', parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 16 } };
const orderBody = { ...instant, email: 'agent@example.com', station_name: 'Fault FM' };

/** For a failure message: each order's settlement transaction and what it moved to the seller. */
async function transfersOf(rpcUrl: string, asset: string, payTo: string, outcomes: any[]): Promise<string> {
  const chain = createPublicClient({ transport: http(rpcUrl) });
  const lines = [];
  for (const o of outcomes) {
    const tx = o.body.order?.payment?.transaction ?? o.body.payment?.transaction;
    if (!tx) {
      lines.push(`no transaction in ${JSON.stringify(o.body).slice(0, 300)}`);
      continue;
    }
    const receipt = await chain.getTransactionReceipt({ hash: tx }).catch((e) => e.message);
    if (typeof receipt === 'string') {
      lines.push(`${tx}: ${receipt}`);
      continue;
    }
    const moved = parseEventLogs({ abi: transferAbi, logs: receipt.logs }).filter(
      (l) => l.address.toLowerCase() === asset.toLowerCase() && l.args.to.toLowerCase() === payTo.toLowerCase(),
    );
    lines.push(`${tx} block ${receipt.blockNumber} ${receipt.status}: ${moved.map((l) => l.args.value).join('+')}`);
  }
  return lines.join('; ');
}
const transferAbi = parseAbi(['event Transfer(address indexed from, address indexed to, uint256 value)']);

function isErrorDocument(body: any, requestId: string | null): boolean {
  return (
    body?.ok === false &&
    typeof body.error?.code === 'string' &&
    typeof body.error?.retryable === 'boolean' &&
    body.error.request_id === requestId
  );
}

/**
 * One owning service for the file, on a PostgreSQL of the test's own (so that the first test can stop it) and a
 * catalog roomy enough for the 80 purchases of the last test; the other tests attach instances of their own to it.
 */
let pgDir: string;
let pgPort: number;
let pg: RunningPostgres;
let owner: Service;
let roomy: Record<string, string>;

before(async () => {
  pgDir = await scratchDir('audio-pg-');
  pgPort = await freePort();
  await copyTemplateCluster(pgDir, 'migrated');
  pg = await startEmbeddedPostgres(pgDir, () => {}, { port: pgPort });
  cleanup.push(() => pg.stop());
  // 80 streams bought with one key: above the shipped per-key limit.
  roomy = { ...unlimited, ...(await roomyCatalog()) };
  owner = await startService({ ...roomy, DATABASE_URL: pg.url });
  cleanup.push(() => owner.stop());
});

/** Repeats a signed purchase until it stops being "in progress" (or a dependency is briefly away). */
async function retryUntilSettled(agent: Pick<Service, 'baseUrl' | 'apiKey'>, p: { key: string; signature: string }) {
  let answer;
  for (let i = 0; i < 100; i++) {
    answer = await request(agent, 'POST', '/orders', {
      body: orderBody,
      headers: { 'idempotency-key': p.key, 'payment-signature': p.signature },
    });
    if (!answer.body.error?.retryable) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return answer!;
}

const count = (statuses: Map<number, number>, status: number) => statuses.get(status) ?? 0;

describe('faults', () => {
  test('PostgreSQL stopped and restarted under load: retryable 503s, nothing half-written, recovery without restart', async () => {
    const service = owner;
    const statuses = new Map<number, number>();
    let running = true;
    const load = (async () => {
      while (running) {
        const answer = await request(service, 'POST', '/quotes', { body: instant }).catch(() => undefined);
        if (!answer) continue;
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        assert.ok(
          answer.status === 200 || answer.status === 503,
          `unexpected ${answer.status}: ${JSON.stringify(answer.body)}`,
        );
        if (answer.status === 503) {
          assert.ok(isErrorDocument(answer.body, answer.headers.get('x-request-id')));
          assert.equal(answer.body.error.retryable, true);
        }
      }
    })();
    // Each phase lasts until the load has seen what it is for (bounded), not a fixed time.
    const seen = (what: string, status: number, atLeast: number) =>
      Promise.race([
        waitFor(what, () => count(statuses, status) >= atLeast, 60_000),
        load.then(() => {
          throw new Error(`the load stopped before ${what}`);
        }),
      ]);
    await seen('answers before the outage', 200, 3);
    await pg.stop();
    await seen('the outage', 503, 3);
    pg = await startEmbeddedPostgres(pgDir, () => {}, { port: pgPort });
    await seen('answers after the outage', 200, count(statuses, 200) + 3);
    running = false;
    await load;

    assert.ok((statuses.get(503) ?? 0) > 0, `the outage was seen: ${JSON.stringify([...statuses])}`);
    assert.ok((statuses.get(200) ?? 0) > 0);
    const after = await request(service, 'POST', '/quotes', { body: instant });
    assert.equal(after.status, 200, 'the service recovered without a restart');
    const health = await request(service, 'GET', '/health', { auth: false });
    assert.equal(health.body.checks.database.ok, true);
    // In this process: test/audit-trail.test.ts runs the command's own.
    const verify = await auditCommand(['audit', 'verify'], service.env);
    assert.equal(verify.code, 0, `the audit chain is intact: ${verify.stderr}`);
  });

  test('chain unreachable: a retryable error, nothing provisioned; the same request succeeds once it is back', async () => {
    const chainDir = await scratchDir('audio-chain-');
    const chainPort = await freePort();
    let chain: EmbeddedChain = await startEmbeddedChain({ dataDir: chainDir, port: chainPort });
    cleanup.push(() => chain.stop());
    await chain.ensureFunded(chain.accounts.buyer.address, 10_000_000n);
    const attached = await startService({
      ...unlimited,
      DATABASE_URL: pg.url,
      CHAIN_RPC_URL: chain.rpcUrl,
      DEV_FACILITATOR_ACCOUNT: '5',
    });
    cleanup.push(() => attached.stop());
    const agent = { baseUrl: attached.baseUrl, apiKey: owner.apiKey };
    const wallet = new TestWallet(chain.accounts.buyer.privateKey, chain.rpcUrl);

    const key = `chain-down-${Date.now()}`;
    const ask = await request(agent, 'POST', '/orders', { body: orderBody, headers: { 'idempotency-key': key } });
    const header = ask.headers.get('payment-required')!;
    const { payTo, asset } = decodePaymentRequiredHeader(header).accepts[0];
    const signature = await wallet.pay(header);
    const sellerBefore = await chain.usdcBalance(payTo as `0x${string}`);

    await chain.stop();
    const down = await request(agent, 'POST', '/orders', {
      body: orderBody,
      headers: { 'idempotency-key': key, 'payment-signature': signature },
    });
    assert.equal(down.status, 503, JSON.stringify(down.body));
    assert.ok(isErrorDocument(down.body, down.headers.get('x-request-id')));
    assert.equal(down.body.error.retryable, true);
    const health = await request(agent, 'GET', '/health', { auth: false });
    assert.equal(health.body.checks.chain.ok, false, '/health says the chain is away');

    chain = await startEmbeddedChain({ dataDir: chainDir, port: chainPort });
    let answer;
    for (let i = 0; i < 50; i++) {
      answer = await request(agent, 'POST', '/orders', {
        body: orderBody,
        headers: { 'idempotency-key': key, 'payment-signature': signature },
      });
      if (!answer.body.error?.retryable) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(answer!.status, 200, JSON.stringify(answer!.body));
    assert.equal((await chain.usdcBalance(payTo as `0x${string}`)) - sellerBefore, 270000n, 'paid once');
    void asset;
    // It shares the database with the next test's instances but pays on a chain of its own: left running, its
    // recovery would take over their orders whose lease ran out and settle them on the wrong chain.
    await attached.stop();
    await chain.stop();
  });

  test('an instance killed at each order state boundary with 20 purchases in flight: each paid authorization has exactly one service, nothing unpaid', async () => {
    const dev = await devFile(owner.dataDir);
    const attachEnv = {
      ...roomy,
      DATABASE_URL: pg.url,
      CHAIN_RPC_URL: dev.chain.rpc_url,
      DEV_FACILITATOR_ACCOUNT: '6',
      ORDER_LEASE_SECONDS: '2',
      ORDER_RECOVERY_INTERVAL_MS: '200',
    };
    const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const points = ['after_claim', 'after_chain_settle', 'after_settled', 'after_provision'];
    // Every doomed instance starts with the survivor, when no order is in flight for their first recovery pass to
    // take over, and runs no other pass: only the survivor recovers the orders of the one killed. They settle from one
    // gas wallet, one instance at a time.
    const doomedAt = (point: string) =>
      startService({
        ...attachEnv,
        DEV_FACILITATOR_ACCOUNT: '8',
        ORDER_CRASH_AT: point,
        ORDER_RECOVERY_INTERVAL_MS: String(3_600_000),
      });
    const [revived, ...allDoomed] = await Promise.all([startService(attachEnv), ...points.map(doomedAt)]);
    cleanup.push(() => revived.stop());
    for (const doomed of allDoomed) cleanup.push(() => doomed.stop());

    for (const [index, point] of points.entries()) {
      // The first of the 20 purchases to reach this point kills the instance; the others are wherever they are.
      const doomed = allDoomed[index];
      const agent = { baseUrl: doomed.baseUrl, apiKey: owner.apiKey };
      const purchases = await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const key = `inflight-${point}-${i}`;
          const ask = await request(agent, 'POST', '/orders', { body: orderBody, headers: { 'idempotency-key': key } });
          return { key, signature: await wallet.pay(ask.headers.get('payment-required')!) };
        }),
      );
      const { payTo, asset } = decodePaymentRequiredHeader(
        (
          await request(agent, 'POST', '/orders', { body: orderBody, headers: { 'idempotency-key': 'probe' } })
        ).headers.get('payment-required')!,
      ).accepts[0];
      const sellerBefore = await wallet.balanceOf(asset, payTo);

      await Promise.all(
        purchases.map((p) =>
          request(agent, 'POST', '/orders', {
            body: orderBody,
            headers: { 'idempotency-key': p.key, 'payment-signature': p.signature },
          }).catch(() => undefined),
        ),
      );
      assert.equal(await doomed.stop('SIGKILL'), null, `${point}: the instance killed itself`);

      const survivor = { baseUrl: revived.baseUrl, apiKey: owner.apiKey };
      // Each purchase is retried until it settles, all at once: each waits out the lease of the killed instance.
      const outcomes = await Promise.all(purchases.map((p) => retryUntilSettled(survivor, p)));
      assert.deepEqual(
        outcomes.filter((o) => o.status !== 200).map((o) => o.body.error?.code),
        [],
        `${point}: every signed purchase completes on retry`,
      );
      assert.equal(
        new Set(outcomes.map((o) => o.body.service.service_id)).size,
        20,
        `${point}: one service per purchase`,
      );
      const delta = (await wallet.balanceOf(asset, payTo)) - sellerBefore;
      if (delta !== 270000n * 20n) {
        const orders = outcomes.map((o) => o.body.order ?? o.body);
        const proofs = await transfersOf(dev.chain.rpc_url, asset, payTo, outcomes);
        assert.fail(`${point}: the seller got ${delta}, not 20 × 270000; orders ${JSON.stringify(orders)}; ${proofs}`);
      }
    }
  });
});
