/**
 * The order benchmarks, on the service that bench/run.ts started (development mode: embedded anvil, in-process facilitator):
 *  1. the 402 path: POST /orders without PAYMENT-SIGNATURE, autocannon, vs the official @x402/express middleware's 402
 *     in a process of its own (bench/x402-express-ref.ts);
 *  2. paid purchases per second at concurrency 1 and 8 (complete paid POST /orders, 200 expected), vs a bare facilitator
 *     (createFacilitator in this process, its own dev account) doing verify + settle of the same kind of payments on the
 *     same chain;
 *     and the same order as the MCP paid tool call (`order` over POST /api/v1/mcp with the SDK client, paid in
 *     _meta["x402/payment"] by the official x402 client, as test/mcp.test.ts does), vs the REST purchases;
 *     and vs a minimal real seller (bench/x402-express-seller-ref.ts: @x402/express, the same in-process facilitator,
 *     one order row committed in the service's PostgreSQL per purchase), which unlike the bare facilitator is durable;
 *  3. chain slowdown: the bare facilitator's settle latency at the chain's current height and after anvil_mine of more blocks.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodePaymentRequiredHeader, decodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { DEV_ACCOUNTS } from '../src/chain/accounts.js';
import { createFacilitator, type Facilitator } from '../src/payments/index.js';
import type { Service } from '../test/support/service.js';
import { TestWallet } from '../test/support/wallet.js';
import { startChildScript, type ChildServer } from './child-script.js';
import { percentile } from './percentile.js';
import { compareLoad, type LoadResult } from './http-load.js';
import { pool } from './pool.js';
import { namedTreesCpu, treeCpu, type TreeCpu } from './process-cpu.js';
import { BARE_FACILITATOR_GAS_ACCOUNT, startSellerReference, type SellerReference } from './seller-reference.js';

export interface OrdersBenchOptions {
  root: string;
  service: Service;
  signal: AbortSignal;
  log: (line: string) => void;
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
  rounds: number;
  /** Purchases timed per contender at each concurrency, e.g. { 1: 60, 8: 200 }. */
  purchases: Array<{ concurrency: number; count: number }>;
  /** Settles timed at each chain height. */
  settleSamples: number;
  /** Blocks mined with anvil_mine between the two settle measurements. */
  mineBlocks: number;
}

export interface PurchaseRun {
  concurrency: number;
  attempted: number;
  ok: number;
  failed: number;
  /** "status code" → count, for what failed. */
  failures: Record<string, number>;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  /**
   * CPU of the whole machine per successful purchase (ms): serve and its children (PostgreSQL, anvil), and for the
   * bare facilitator also this process, where it runs; for the seller reference its process and serve's PostgreSQL
   * and anvil, not serve; never the load generator's own HTTP client. NaN without /proc.
   */
  cpuMs: number;
}

export interface SettleSample {
  blockNumber: number;
  samples: number;
  medianMs: number;
  p90Ms: number;
  verifyMedianMs: number;
  failed: number;
}

export interface OrdersResults {
  connections: number;
  /** The machine's cores, which servers, chain, database and load generator share. */
  cores: number;
  durationSeconds: number;
  paywall: { reference: LoadResult; service: LoadResult; referenceBytes: number; serviceBytes: number };
  /**
   * service: paid POST /orders; mcp: the same order as the MCP `order` tool call; bare: the facilitator alone;
   * seller: the @x402/express seller reference (verify, one durable INSERT, settle).
   */
  purchases: Array<{
    concurrency: number;
    service: PurchaseRun;
    mcp: PurchaseRun;
    bare: PurchaseRun;
    seller: PurchaseRun;
  }>;
  slowdown: { before: SettleSample; after: SettleSample; mined: number; mineMs: number };
}

interface DevJson {
  base_url: string;
  api_key: string;
  chain: { rpc_url: string; chain_id: number };
  buyer: { address: string; private_key: `0x${string}` };
}

const orderRequest = {
  product_id: 'instant-stream',
  email: 'a@example.com',
  station_name: 'Bench',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};
const orderBody = JSON.stringify(orderRequest);

export async function runOrdersBench(o: OrdersBenchOptions): Promise<OrdersResults> {
  const dev = JSON.parse(await readFile(join(o.service.dataDir, 'dev.json'), 'utf8')) as DevJson;
  const ordersUrl = `${o.service.baseUrl}/orders`;
  /** Fails fast when the service process is gone (instead of timing a run of connection errors). */
  const serviceAlive = () => {
    const p = o.service.process;
    if (p.exitCode !== null || p.signalCode !== null)
      throw new Error(`the service exited (code ${p.exitCode}, signal ${p.signalCode}) during the order benchmark`);
  };
  const headers = (key: string, extra: Record<string, string> = {}) => ({
    'content-type': 'application/json',
    authorization: `Bearer ${o.service.apiKey}`,
    'idempotency-key': key,
    ...extra,
  });
  const ask402 = async (key: string): Promise<string> => {
    const r = await fetch(ordersUrl, { method: 'POST', headers: headers(key), body: orderBody, signal: o.signal });
    const text = await r.text();
    const required = r.headers.get('payment-required');
    if (r.status !== 402 || !required)
      throw new Error(
        `POST /orders without payment answered ${r.status} (PAYMENT-REQUIRED ${required ? 'present' : 'missing'}): ${text}`,
      );
    return required;
  };

  // ---- 1. the 402 path -------------------------------------------------------------------------------------------
  const serviceRequired = decodePaymentRequiredHeader(await ask402('bench-402-fixed-key'));
  const [accept] = serviceRequired.accepts;
  let reference: ChildServer | undefined;
  let paywall: OrdersResults['paywall'];
  try {
    o.log('starting the @x402/express reference (bench/x402-express-ref.ts)');
    reference = await startChildScript(o.root, 'bench/x402-express-ref.ts', [accept.payTo]);
    const refTarget = {
      url: `${reference.baseUrl}/orders`,
      method: 'POST' as const,
      headers: headers('bench-402-fixed-key'),
      body: orderBody,
    };
    const serviceTarget = {
      url: ordersUrl,
      method: 'POST' as const,
      headers: headers('bench-402-fixed-key'),
      body: orderBody,
    };
    // Sanity: both answer 402 for the same terms (amount, asset, network, payTo, timeout, extra).
    const refResponse = await fetch(refTarget.url, { method: 'POST', headers: refTarget.headers, body: orderBody });
    const refBody = await refResponse.text();
    const refHeader = refResponse.headers.get('payment-required');
    assert.equal(refResponse.status, 402, `the reference answered ${refResponse.status}: ${refBody}`);
    assert.ok(refHeader, 'the reference sent no PAYMENT-REQUIRED');
    const refAccept = decodePaymentRequiredHeader(refHeader).accepts[0];
    const terms = (a: PaymentRequirements) => ({
      scheme: a.scheme,
      network: a.network,
      amount: a.amount,
      asset: a.asset,
      payTo: a.payTo,
      maxTimeoutSeconds: a.maxTimeoutSeconds,
      extra: a.extra,
    });
    assert.deepEqual(terms(refAccept), terms(accept), 'the reference and the service ask for different payment terms');
    const serviceResponse = await fetch(serviceTarget.url, {
      method: 'POST',
      headers: serviceTarget.headers,
      body: orderBody,
    });
    const serviceBody = await serviceResponse.text();
    const serviceHeader = serviceResponse.headers.get('payment-required') ?? '';
    o.log(
      `402 on both for ${accept.amount} atomic to ${accept.payTo}; PAYMENT-REQUIRED ${serviceHeader.length} B + body ${serviceBody.length} B (service), ${refHeader.length} B + ${refBody.length} B (reference)`,
    );

    o.log(
      `load: 402 path: ${o.warmupSeconds} s warm-up each, then ${o.rounds} × ${o.durationSeconds / o.rounds} s alternating (reference, service)`,
    );
    const [ref, svc] = await compareLoad(
      [
        { target: refTarget, expectStatus: 402, pid: reference.pid },
        { target: serviceTarget, expectStatus: 402, pid: o.service.process.pid },
      ],
      {
        connections: o.connections,
        warmupSeconds: o.warmupSeconds,
        durationSeconds: o.durationSeconds,
        rounds: o.rounds,
        signal: o.signal,
        onSlice: (i, round) =>
          o.log(`  round ${round + 1}: ${i === 0 ? '@x402/express reference' : 'service'} POST /orders (402)`),
      },
    );
    for (const r of [ref, svc])
      if (r.unexpected || r.errors) o.log(`  warning: ${r.unexpected} answers other than 402 and ${r.errors} errors`);
    serviceAlive();
    paywall = {
      reference: ref,
      service: svc,
      referenceBytes: refHeader.length + refBody.length,
      serviceBytes: serviceHeader.length + serviceBody.length,
    };
  } finally {
    await reference?.stop();
  }

  // ---- 2. paid purchases vs the bare facilitator -----------------------------------------------------------------
  const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  // A facilitator of our own on the service's chain; DEV_ACCOUNTS[0] is the service's, [4] is nobody's.
  const facilitator = createFacilitator({
    mode: 'embedded',
    rpcUrl: dev.chain.rpc_url,
    chainId: dev.chain.chain_id,
    privateKey: DEV_ACCOUNTS[BARE_FACILITATOR_GAS_ACCOUNT].privateKey,
  });
  const facilitatorRequired = await ask402('bench-bare-facilitator');
  const signPayments = async (n: number) => {
    const out: Array<{ payload: PaymentPayload; requirements: PaymentRequirements }> = [];
    for (let i = 0; i < n; i++) {
      const payload = decodePaymentSignatureHeader(await wallet.pay(facilitatorRequired));
      out.push({ payload, requirements: payload.accepted });
    }
    return out;
  };

  let keyCounter = 0;
  const runTag = `${process.pid}-${Date.now()}`;
  /** Each purchase: its own Idempotency-Key, its own 402, its own signature over that PAYMENT-REQUIRED. */
  const signOrders = async (n: number) =>
    pool(
      Array.from({ length: n }, () => `bench-${runTag}-${keyCounter++}`),
      4,
      async (key) => {
        o.signal.throwIfAborted();
        return { key, signature: await wallet.pay(await ask402(key)) };
      },
    );

  const buy = async (order: { key: string; signature: string }) => {
    const r = await fetch(ordersUrl, {
      method: 'POST',
      headers: headers(order.key, { 'payment-signature': order.signature }),
      body: orderBody,
      signal: AbortSignal.any([o.signal, AbortSignal.timeout(30_000)]),
    });
    const body = (await r.json().catch(() => undefined)) as
      | { ok?: boolean; order?: { status?: string }; error?: { code?: string } }
      | undefined;
    if (r.status === 200 && body?.ok === true && body.order?.status === 'active') return undefined;
    return `${r.status} ${body?.error?.code ?? body?.order?.status ?? ''}`.trim();
  };
  const settleBare = async (p: { payload: PaymentPayload; requirements: PaymentRequirements }) => {
    const verified = await facilitator.verify(p.payload, p.requirements);
    if (!verified.isValid) return `verify ${verified.invalidReason ?? 'invalid'}`;
    const settled = await facilitator.settle(p.payload, p.requirements);
    return settled.success ? undefined : `settle ${settled.errorReason ?? 'failed'}`;
  };

  // The MCP paid tool as an agent calls it: the SDK's client over Streamable HTTP, the payload in _meta["x402/payment"].
  const mcp = new McpClient({ name: 'bench-agent', version: '1.0.0' });
  await mcp.connect(
    new StreamableHTTPClientTransport(new URL(`${o.service.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${o.service.apiKey}` } },
    }),
  );
  type ToolResult = {
    isError?: boolean;
    structuredContent?: { order?: { status?: string }; error?: { code?: string } } & Partial<PaymentRequired>;
  };
  const callOrder = (key: string, payment?: PaymentPayload) =>
    mcp.callTool(
      {
        name: 'order',
        arguments: { idempotency_key: key, ...orderRequest },
        ...(payment && { _meta: { 'x402/payment': payment } }),
      },
      undefined,
      { timeout: 30_000, signal: o.signal },
    ) as Promise<ToolResult>;
  /** Each tool purchase: its own idempotency_key, its own PaymentRequired (the unpaid call's result), its own payload. */
  const signToolOrders = async (n: number) =>
    pool(
      Array.from({ length: n }, () => `bench-mcp-${runTag}-${keyCounter++}`),
      4,
      async (key) => {
        o.signal.throwIfAborted();
        const unpaid = await callOrder(key);
        const required = unpaid.structuredContent as PaymentRequired | undefined;
        if (!unpaid.isError || required?.x402Version !== 2)
          throw new Error(
            `the unpaid MCP order call did not answer a PaymentRequired: ${JSON.stringify(unpaid).slice(0, 500)}`,
          );
        return { key, payment: await wallet.client.createPaymentPayload(required) };
      },
    );
  const buyTool = async (toolOrder: { key: string; payment: PaymentPayload }) => {
    const result = await callOrder(toolOrder.key, toolOrder.payment);
    if (!result.isError && result.structuredContent?.order?.status === 'active') return undefined;
    return `tool ${result.isError ? 'error' : 'ok'} ${result.structuredContent?.error?.code ?? result.structuredContent?.order?.status ?? ''}`.trim();
  };

  o.log('starting the seller reference (bench/x402-express-seller-ref.ts: @x402/express, facilitator, PostgreSQL)');
  const seller = await startSellerReference({
    root: o.root,
    dataDir: o.service.dataDir,
    rpcUrl: dev.chain.rpc_url,
    chainId: dev.chain.chain_id,
    terms: accept,
    wallet,
    body: orderBody,
  });
  const buySeller = (signature: string) => seller.buy(signature, o.signal);
  const purchases: OrdersResults['purchases'] = [];
  // Which side failed, after how long, and why: a timeout is the bench's 30 s limit on one purchase.
  const failed = (who: string) => (failure: string, ms: number) =>
    o.log(`    ${who}: a purchase failed after ${ms.toFixed(0)} ms: ${failure}`);
  try {
    const committedBefore = await seller.committedOrders();
    o.log(
      'paid purchases: warm-up (3 service purchases, 3 MCP tool purchases, 3 seller reference purchases, 3 bare verify+settle)',
    );
    for (const order of await signOrders(3)) {
      const failure = await buy(order);
      if (failure) throw new Error(`a warm-up purchase failed: ${failure}\n${o.service.output().slice(-2000)}`);
    }
    for (const toolOrder of await signToolOrders(3)) {
      const failure = await buyTool(toolOrder);
      if (failure)
        throw new Error(`a warm-up MCP tool purchase failed: ${failure}\n${o.service.output().slice(-2000)}`);
    }
    for (const signature of await seller.sign(3, o.signal)) {
      const failure = await buySeller(signature);
      if (failure) throw new Error(`a warm-up seller reference purchase failed: ${failure}`);
    }
    for (const p of await signPayments(3)) {
      const failure = await settleBare(p);
      if (failure) throw new Error(`a warm-up bare verify+settle failed: ${failure}`);
    }

    for (const { concurrency, count } of o.purchases) {
      o.signal.throwIfAborted();
      o.log(
        `paid purchases at concurrency ${concurrency}: signing ${count} orders (each its own 402), ${count} MCP tool orders, ${count} seller reference orders (each its own 402) and ${count} bare payments`,
      );
      const orders = await signOrders(count);
      const toolOrders = await signToolOrders(count);
      const sellerOrders = await seller.sign(count, o.signal);
      const payments = await signPayments(count);
      const svc = newRun(concurrency);
      const tool = newRun(concurrency);
      const ref = newRun(concurrency);
      const bare = newRun(concurrency);
      // Alternating parts (service, MCP, seller reference, bare, service, …), like the HTTP slices.
      const slices = Math.max(1, o.rounds);
      for (let s = 0; s < slices; s++) {
        const from = Math.floor((count * s) / slices);
        const to = Math.floor((count * (s + 1)) / slices);
        const perPurchaseMs = (seconds: number) => ((seconds * 1000) / (to - from)).toFixed(1);
        o.log(`  round ${s + 1}: service, ${to - from} paid POST /orders at concurrency ${concurrency}`);
        const used = await machineCpu(o.service.process.pid!, svc, false, () =>
          timedPool(orders.slice(from, to), concurrency, buy, svc, o.signal, failed('service')),
        );
        if (used)
          o.log(
            `    CPU per purchase: serve ${perPurchaseMs(used.self)} ms, its children (PostgreSQL, anvil) ${perPurchaseMs(used.descendants)} ms`,
          );
        serviceAlive();
        o.log(`  round ${s + 1}: service, ${to - from} paid MCP \`order\` tool calls at concurrency ${concurrency}`);
        await machineCpu(o.service.process.pid!, tool, false, () =>
          timedPool(toolOrders.slice(from, to), concurrency, buyTool, tool, o.signal, failed('MCP tool')),
        );
        serviceAlive();
        o.log(`  round ${s + 1}: seller reference, ${to - from} paid POST /orders at concurrency ${concurrency}`);
        const refUsed = await sellerCpu(seller, o.service.process.pid!, ref, () =>
          timedPool(sellerOrders.slice(from, to), concurrency, buySeller, ref, o.signal, failed('seller reference')),
        );
        if (refUsed)
          o.log(
            `    CPU per purchase: reference ${perPurchaseMs(refUsed.reference)} ms, serve's PostgreSQL and anvil ${perPurchaseMs(refUsed.backing)} ms`,
          );
        serviceAlive();
        o.log(`  round ${s + 1}: bare facilitator, ${to - from} verify+settle at concurrency ${concurrency}`);
        const bareUsed = await machineCpu(o.service.process.pid!, bare, true, () =>
          timedPool(payments.slice(from, to), concurrency, settleBare, bare, o.signal, failed('bare facilitator')),
        );
        if (bareUsed)
          o.log(
            `    CPU per purchase: this process ${perPurchaseMs(bareUsed.own)} ms, serve ${perPurchaseMs(bareUsed.self)} ms, its children (PostgreSQL, anvil) ${perPurchaseMs(bareUsed.descendants)} ms`,
          );
        serviceAlive();
      }
      finishRun(svc);
      finishRun(tool);
      finishRun(ref);
      finishRun(bare);
      for (const [name, r] of [
        ['service', svc],
        ['MCP tool', tool],
        ['seller reference', ref],
        ['bare facilitator', bare],
      ] as const) {
        if (r.failed) o.log(`  warning: ${name}: ${r.failed} of ${r.attempted} failed: ${JSON.stringify(r.failures)}`);
      }
      purchases.push({ concurrency, service: svc, mcp: tool, bare, seller: ref });
    }
    // Every purchase the reference answered as a success committed its order row.
    const committed = (await seller.committedOrders()) - committedBefore;
    const succeeded = 3 + purchases.reduce((n, p) => n + p.seller.ok, 0);
    assert.ok(
      committed >= succeeded,
      `the seller reference committed ${committed} order rows for ${succeeded} successful purchases`,
    );
  } finally {
    await seller.stop();
  }

  // ---- 3. chain slowdown ----------------------------------------------------------------------------------------
  o.signal.throwIfAborted();
  serviceAlive();
  o.log(
    `chain slowdown: ${o.settleSamples} sequential bare settles, then anvil_mine ${o.mineBlocks} blocks, then ${o.settleSamples} more`,
  );
  const before = await settleLatency(facilitator, await signPayments(o.settleSamples + 3), dev.chain.rpc_url, o.signal);
  const heightBeforeMining = await blockNumber(dev.chain.rpc_url);
  const mineStarted = performance.now();
  await rpc(dev.chain.rpc_url, 'anvil_mine', [`0x${o.mineBlocks.toString(16)}`]);
  const mineMs = performance.now() - mineStarted;
  const mined = (await blockNumber(dev.chain.rpc_url)) - heightBeforeMining;
  o.log(`  mined ${mined} blocks in ${mineMs.toFixed(0)} ms`);
  // Let the service's 1 s ledger checkpoint read the mined blocks before measuring, so it does not overlap.
  await new Promise((r) => setTimeout(r, 1_500));
  const after = await settleLatency(facilitator, await signPayments(o.settleSamples + 3), dev.chain.rpc_url, o.signal);

  // Stateless MCP: closing only ends the client's pending requests (an early throw just leaves it to the process exit).
  await mcp.close();
  return {
    connections: o.connections,
    cores: availableParallelism(),
    durationSeconds: o.durationSeconds,
    paywall,
    purchases,
    slowdown: { before, after, mined, mineMs },
  };
}

/** Sequential verify (timed apart) then settle; the first 3 are discarded as warm-up. */
async function settleLatency(
  facilitator: Facilitator,
  payments: Array<{ payload: PaymentPayload; requirements: PaymentRequirements }>,
  rpcUrl: string,
  signal: AbortSignal,
): Promise<SettleSample> {
  const height = await blockNumber(rpcUrl);
  const settles: number[] = [];
  const verifies: number[] = [];
  let failed = 0;
  for (const [i, p] of payments.entries()) {
    signal.throwIfAborted();
    const v0 = performance.now();
    const verified = await facilitator.verify(p.payload, p.requirements);
    const v1 = performance.now();
    const settled = verified.isValid ? await facilitator.settle(p.payload, p.requirements) : undefined;
    const s1 = performance.now();
    if (!settled?.success) {
      failed++;
      continue;
    }
    if (i < 3) continue;
    verifies.push(v1 - v0);
    settles.push(s1 - v1);
  }
  const sortedSettles = Float64Array.from(settles).sort();
  return {
    blockNumber: height,
    samples: settles.length,
    medianMs: percentile(sortedSettles, 0.5),
    p90Ms: percentile(sortedSettles, 0.9),
    verifyMedianMs: percentile(Float64Array.from(verifies).sort(), 0.5),
    failed,
  };
}

type OpenRun = PurchaseRun & { latencies: number[]; cpuSeconds: number };

function newRun(concurrency: number): OpenRun {
  return {
    concurrency,
    attempted: 0,
    ok: 0,
    failed: 0,
    failures: {},
    seconds: 0,
    perSecond: 0,
    p50Ms: 0,
    p99Ms: 0,
    cpuMs: NaN,
    latencies: [],
    cpuSeconds: 0,
  };
}

function finishRun(run: OpenRun): void {
  const sorted = Float64Array.from(run.latencies).sort();
  run.perSecond = run.ok / run.seconds;
  run.p50Ms = percentile(sorted, 0.5);
  run.p99Ms = percentile(sorted, 0.99);
  run.cpuMs = (run.cpuSeconds * 1000) / run.ok;
  delete (run as Partial<OpenRun>).latencies;
  delete (run as Partial<OpenRun>).cpuSeconds;
}

/**
 * Runs `work` and adds to `run` the CPU the machine spent on it: serve's and its children's (PostgreSQL, anvil), plus
 * this process's when the contender runs here (the bare facilitator). Returns serve's, its children's and this process's parts.
 */
async function machineCpu(
  servePid: number,
  run: OpenRun,
  inThisProcess: boolean,
  work: () => Promise<void>,
): Promise<(TreeCpu & { own: number }) | undefined> {
  const tree = await treeCpu(servePid);
  const own = process.cpuUsage();
  await work();
  const ownUsed = process.cpuUsage(own);
  const treeAfter = await treeCpu(servePid);
  if (!tree || !treeAfter) {
    run.cpuSeconds = NaN;
    return undefined;
  }
  const used = {
    self: treeAfter.self - tree.self,
    descendants: treeAfter.descendants - tree.descendants,
    own: (ownUsed.user + ownUsed.system) / 1e6,
  };
  run.cpuSeconds += used.self + used.descendants + (inThisProcess ? used.own : 0);
  return used;
}

/**
 * Runs `work` and adds to `run` the CPU the seller reference's purchases cost the machine: the reference's process and
 * serve's PostgreSQL and anvil, which it uses (not serve itself, which meanwhile does only its background work).
 */
async function sellerCpu(
  seller: SellerReference,
  servePid: number,
  run: OpenRun,
  work: () => Promise<void>,
): Promise<{ reference: number; backing: number } | undefined> {
  const measure = async () => {
    const reference = await treeCpu(seller.pid);
    const backing = await namedTreesCpu(servePid, ['postgres', 'anvil']);
    return reference && backing !== undefined
      ? { reference: reference.self + reference.descendants, backing }
      : undefined;
  };
  const before = await measure();
  await work();
  const after = await measure();
  if (!before || !after) {
    run.cpuSeconds = NaN;
    return undefined;
  }
  const used = { reference: after.reference - before.reference, backing: after.backing - before.backing };
  run.cpuSeconds += used.reference + used.backing;
  return used;
}

/** Runs `work` over `items` with `concurrency` workers, adding wall time, successes, failures and latencies to `run`. */
async function timedPool<T>(
  items: T[],
  concurrency: number,
  work: (item: T) => Promise<string | undefined>,
  run: OpenRun,
  signal: AbortSignal,
  onFailure?: (failure: string, ms: number) => void,
): Promise<void> {
  const started = performance.now();
  await pool(items, concurrency, async (item) => {
    signal.throwIfAborted();
    const t0 = performance.now();
    let failure: string | undefined;
    try {
      failure = await work(item);
    } catch (e) {
      if (signal.aborted) throw e;
      failure = `threw ${(e as Error).message.split('\n')[0].slice(0, 80)}`;
    }
    run.attempted++;
    if (failure) {
      onFailure?.(failure, performance.now() - t0);
      run.failed++;
      run.failures[failure] = (run.failures[failure] ?? 0) + 1;
    } else {
      run.ok++;
      run.latencies.push(performance.now() - t0);
    }
  });
  run.seconds += (performance.now() - started) / 1000;
}

async function rpc(url: string, method: string, params: unknown[]): Promise<unknown> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(60_000),
  });
  const body = (await r.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

async function blockNumber(url: string): Promise<number> {
  return Number(await rpc(url, 'eth_blockNumber', []));
}
