/**
 * npm run bench — in one run: the quote-evaluation micro-benchmark, then HTTP load (autocannon) on the real
 * service and on a bare Koa baseline, each server in a process of its own, cases one after the other.
 * Prints the tables and writes them to docs/benchmarks.md (skip that with --no-write-docs).
 * Options: --duration <s> (8, measured per case), --warmup <s> (2), --rounds <n> (2 alternating slices), --connections <n> (32), --calls <n> (50000), --warmup-calls <n> (5000).
 * Then the order benchmarks (bench/orders.ts): the 402 path vs @x402/express, paid purchases/s vs a bare facilitator
 * and vs a seller on @x402/express that commits each order in PostgreSQL,
 * settle latency before and after mining blocks. Options: --purchases <c:n,...> (1:60,8:200), --settle-samples <n> (30),
 * --mine-blocks <n> (2000), --no-orders (skip them).
 * Then the streaming benchmark (bench/streaming.ts): Icecast auth-callback throughput and concurrent mounts with listeners.
 * Options: --streaming-mounts <k,...> (20,100), --no-streaming (skip it). Then HLS (bench/hls.ts, its own process and
 * service; also `npm run bench:hls`): CPU per rendition, HLS listeners per core, the listen page's time to first sound.
 * --repeat <n> (1): runs the micro-benchmark, HTTP and order benchmarks n times on the same service and reports each
 * target's ratio over the runs (min / median / max); the detailed tables are those of the last run. Streaming runs once.
 * --budget <s>: stop everything after this long instead of the default deadline (below), e.g. on a loaded machine.
 * --only orders: only the order benchmarks (no micro-benchmark, HTTP or streaming); writes only their section, with
 * the spread of their targets in it.
 * Last, admission at the scale of a host (bench/admission.ts, its own process and service; also `npm run
 * bench:admission`): 2000 listeners opened at once on 40 streams of 50 places. --only admission: only that.
 * --only startup: only the process start cost (bench/startup.ts): CPU of a serve start and of CLI commands.
 * --startup-runs <n> (5): runs per process in it (the median is reported).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { roomyCatalog, startService, type Service } from '../test/support/service.js';
import { startChildScript, type ChildServer } from './child-script.js';
import { writeDocsSection } from './docs.js';
import { runAdmissionSection, runHlsSection } from './hls-section.js';
import { compareLoad, type LoadTarget } from './http-load.js';
import { instantStreamInput, runMicro } from './micro.js';
import { machineLine, reportTables, type HttpResults, type Machine } from './report.js';
import { runOrdersBench } from './orders.js';
import { ordersTables, writeOrdersDocsSection } from './orders-report.js';
import { runStreamingSection } from './streaming-section.js';
import { ordersTargets } from './orders-report.js';
import { spreadTable, type SpreadRow } from './spread.js';
import { targets as httpTargets } from './report.js';

const root = fileURLToPath(new URL('../', import.meta.url));
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '32' },
    calls: { type: 'string', default: '50000' },
    'warmup-calls': { type: 'string', default: '5000' },
    'write-docs': { type: 'boolean', default: true },
    'no-write-docs': { type: 'boolean', default: false },
    purchases: { type: 'string', default: '1:60,8:200' },
    'settle-samples': { type: 'string', default: '30' },
    'mine-blocks': { type: 'string', default: '2000' },
    'no-orders': { type: 'boolean', default: false },
    'no-streaming': { type: 'boolean', default: false },
    'streaming-mounts': { type: 'string', default: '20,100' },
    repeat: { type: 'string', default: '1' },
    only: { type: 'string' },
    budget: { type: 'string' },
    'startup-runs': { type: 'string', default: '5' },
  },
});
const ONLY = ['orders', 'admission', 'startup'];
if (args.only !== undefined && !ONLY.includes(args.only)) {
  throw new Error(`--only takes ${ONLY.map((o) => `"${o}"`).join(', ')}, not "${args.only}"`);
}
if (args.only === 'startup') {
  const { runStartupSection } = await import('./startup.js');
  const began = Date.now();
  await runStartupSection({
    root,
    runs: Number(args['startup-runs']),
    writeDocs: args['write-docs'] && !args['no-write-docs'],
    log: (line) => process.stderr.write(`[bench ${((Date.now() - began) / 1000).toFixed(1)}s] ${line}\n`),
  });
  process.exit(0);
}
const onlyOrders = args.only === 'orders';
if (args.only === 'admission') {
  const writeAdmission = args['write-docs'] && !args['no-write-docs'];
  await runAdmissionSection(
    fileURLToPath(new URL('../', import.meta.url)),
    writeAdmission,
    AbortSignal.timeout(900_000),
  );
  process.exit(0);
}
if (onlyOrders && args['no-orders']) throw new Error('--only orders and --no-orders leave nothing to run');
const durationSeconds = Number(args.duration);
const warmupSeconds = Number(args.warmup);
const connections = Number(args.connections);
const rounds = Number(args.rounds);
const writeDocs = args['write-docs'] && !args['no-write-docs'];
const repeat = Math.max(1, Number(args.repeat));

/**
 * Past this the load stops and everything is shut down: 300 s for the HTTP and order parts (the paid purchases over REST, MCP and the bare facilitator), and for streaming two
 * minutes (one of them for the restart) plus, per mount count, its hold and the time to admit its sources and listeners (~0.6 s per mount).
 */
// The streaming section, then HLS (about 3 minutes on this machine), then admission (about 3 minutes).
const streamingBudgetMs =
  120_000 +
  240_000 +
  300_000 +
  args['streaming-mounts']
    .split(',')
    .map(Number)
    .filter((k) => k > 0)
    .reduce((sum, k) => sum + 15_000 + k * 600, 0);
const DEADLINE_MS = args.budget
  ? Number(args.budget) * 1000
  : 300_000 * repeat + (args['no-streaming'] || onlyOrders ? 0 : streamingBudgetMs);

const startedAt = Date.now();
const abort = new AbortController();
const deadline = setTimeout(
  () => abort.abort(new Error(`the benchmark ran past ${DEADLINE_MS / 1000} s; stopping`)),
  DEADLINE_MS,
);
deadline.unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => abort.abort(new Error(`interrupted by ${signal}`)));

const log = (line: string) =>
  process.stderr.write(`[bench ${((Date.now() - startedAt) / 1000).toFixed(1)}s] ${line}\n`);

const machine: Machine = {
  date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  cores: availableParallelism(),
  loadAverage: loadavg(),
  node: process.version,
  cpu: cpus()[0]?.model.trim() ?? 'unknown CPU',
};
console.log(`Machine: ${machineLine(machine)}`);

let service: Service | undefined;
let bare: ChildServer | undefined;
let scratch: string | undefined;
let exitCode = 0;
try {
  log('starting the service (embedded PostgreSQL on a temporary DATA_DIR)');
  // Throughput is what is measured here: the per-client rate limits would cap it. The order benchmarks buy a few
  // hundred one-hour streams and the streaming one as many mounts as it measures: room for all of them.
  // One key and one wallet buy them all: buyer limits far above that, still checked on every order as in production.
  service = await startService({
    RATE_LIMIT_PER_IP: '0',
    RATE_LIMIT_PER_KEY: '0',
    ICECAST_MAX_SOURCES: '2000',
    ICECAST_MAX_LISTENERS: '100000',
    ...(await roomyCatalog()),
  });
  abort.signal.throwIfAborted();
  const products = Buffer.from(await (await expectOk(fetch(`${service.baseUrl}/products`))).arrayBuffer());
  scratch = await mkdtemp(join(tmpdir(), 'audio-bench-'));
  const productsFile = join(scratch, 'products.json');
  await writeFile(productsFile, products);

  const quoteBody = JSON.stringify(instantStreamInput);
  const json = { 'content-type': 'application/json' };
  let targets: Record<'bareGet' | 'serviceGet' | 'barePost' | 'servicePost', LoadTarget> | undefined;
  if (!onlyOrders) {
    log('starting the bare Koa baseline');
    bare = await startChildScript(root, 'bench/bare-koa.ts', [productsFile]);
    abort.signal.throwIfAborted();

    targets = {
      bareGet: { url: `${bare.baseUrl}/products`, method: 'GET' },
      serviceGet: { url: `${service.baseUrl}/products`, method: 'GET' },
      barePost: { url: `${bare.baseUrl}/echo`, method: 'POST', headers: json, body: quoteBody },
      servicePost: {
        url: `${service.baseUrl}/quotes`,
        method: 'POST',
        headers: { ...json, authorization: `Bearer ${service.apiKey}` },
        body: quoteBody,
      },
    };

    // Sanity: same /products bytes on both servers, and one good POST on each, before any load.
    const bareProducts = Buffer.from(await (await expectOk(fetch(targets.bareGet.url))).arrayBuffer());
    assert.ok(bareProducts.equals(products), 'the bare Koa GET /products does not serve the same bytes as the service');
    const quote = await (await expectOk(send(targets.servicePost))).text();
    const echo = await (await expectOk(send(targets.barePost))).text();
    log(
      `GET /products ${products.length} B on both; POST /quotes answers ${quote.length} B, POST /echo ${echo.length} B`,
    );
  }

  const rows = spreadRows();
  let micro: Awaited<ReturnType<typeof runMicro>> | undefined;
  let http: HttpResults | undefined;
  let ordersText: string | undefined;
  for (let run = 1; run <= repeat; run++) {
    if (repeat > 1) log(`run ${run} of ${repeat}`);
    if (!onlyOrders) {
      log(`micro-benchmark: ${args['warmup-calls']} warm-up + ${args.calls} measured calls per case`);
      micro = await runMicro(root, Number(args['warmup-calls']), Number(args.calls));
      abort.signal.throwIfAborted();

      const settings = { connections, warmupSeconds, durationSeconds, rounds, signal: abort.signal };
      const compare = async (
        label: string,
        baseline: LoadTarget,
        baselinePid: number,
        subject: LoadTarget,
        subjectPid: number,
      ) => {
        log(
          `load: ${label}: ${warmupSeconds} s warm-up each, then ${rounds} × ${durationSeconds / rounds} s alternating (bare, service)`,
        );
        const [b, s] = await compareLoad(
          [
            { target: baseline, pid: baselinePid },
            { target: subject, pid: subjectPid },
          ],
          {
            ...settings,
            onSlice: (i, round) =>
              log(
                `  round ${round + 1}: ${i === 0 ? 'bare Koa' : 'service'} ${(i === 0 ? baseline : subject).method} ${(i === 0 ? baseline : subject).url}`,
              ),
          },
        );
        for (const r of [b, s])
          if (r.unexpected || r.errors) log(`  warning: ${r.unexpected} non-2xx responses and ${r.errors} errors`);
        return [b, s] as const;
      };
      const [bareGet, serviceGet] = await compare(
        'GET /products',
        targets!.bareGet,
        bare!.pid,
        targets!.serviceGet,
        service.process.pid!,
      );
      const [barePost, servicePost] = await compare(
        'JSON POST',
        targets!.barePost,
        bare!.pid,
        targets!.servicePost,
        service.process.pid!,
      );
      http = { connections, durationSeconds, bareGet, serviceGet, barePost, servicePost };
      rows.evaluate.values.push(micro.instantStream.medianUs);
      rows.get.values.push(serviceGet.reqPerSec / bareGet.reqPerSec);
      rows.post.values.push(servicePost.reqPerSec / barePost.reqPerSec);
      rows.postP99.values.push(servicePost.p99Ms);
      console.log(
        `\nRun ${run}, ${machineLine({ ...machine, loadAverageAfter: loadavg() })}\n\n${reportTables(micro, http)}\n`,
      );
    }

    if (!args['no-orders']) {
      const purchases = args.purchases.split(',').map((pair) => {
        const [concurrency, count] = pair.split(':').map(Number);
        return { concurrency, count };
      });
      const orders = await runOrdersBench({
        root,
        service,
        signal: abort.signal,
        log,
        connections,
        warmupSeconds,
        durationSeconds,
        rounds,
        purchases,
        settleSamples: Number(args['settle-samples']),
        mineBlocks: Number(args['mine-blocks']),
      });
      rows.paywall.values.push(orders.paywall.service.reqPerSec / orders.paywall.reference.reqPerSec);
      for (const p of orders.purchases) {
        (rows.purchases[p.concurrency] ??= purchaseRow(p.concurrency)).values.push(
          p.service.failed ? 0 : p.service.perSecond / p.bare.perSecond,
        );
        (rows.mcp[p.concurrency] ??= mcpRow(p.concurrency)).values.push(
          p.mcp.failed ? 0 : p.mcp.perSecond / p.service.perSecond,
        );
        // A run where the reference failed compares with nothing: left out of the spread (its row counts the runs).
        const sellerValues = (rows.seller[p.concurrency] ??= sellerRow(p.concurrency)).values;
        if (p.service.failed || !p.seller.failed)
          sellerValues.push(p.service.failed ? 0 : p.service.perSecond / p.seller.perSecond);
        (rows.serviceBeyond[p.concurrency] ??= beyondRow('service paid POST /orders', p.concurrency)).values.push(
          p.service.cpuMs - p.bare.cpuMs,
        );
        (rows.sellerBeyond[p.concurrency] ??= beyondRow('seller reference', p.concurrency)).values.push(
          p.seller.cpuMs - p.bare.cpuMs,
        );
      }
      ordersText = ordersTables(orders);
      console.log(
        `\nOrders, run ${run}, ${machineLine({ ...machine, loadAverageAfter: loadavg() })}\n\n${ordersText}\n`,
      );
    }
  }

  machine.loadAverageAfter = loadavg();
  const orderRows = [
    rows.paywall,
    ...Object.values(rows.purchases),
    ...Object.values(rows.seller),
    ...Object.values(rows.serviceBeyond),
    ...Object.values(rows.sellerBeyond),
    ...Object.values(rows.mcp),
  ];
  const spread = spreadTable(onlyOrders ? orderRows : [rows.evaluate, rows.get, rows.post, rows.postP99, ...orderRows]);
  console.log(`\nMachine: ${machineLine(machine)}\n\n${spread}\n`);

  if (writeDocs && !onlyOrders) {
    const tables = `${reportTables(micro!, http!)}\n\n${spread}`;
    await writeDocsSection(
      join(root, 'docs/benchmarks.md'),
      [
        '## Latest run',
        '',
        `${machineLine(machine)}.`,
        '',
        repeat > 1
          ? `Tables of the last of ${repeat} runs on the same service; the spread over all runs at the end.`
          : 'One run (`--repeat 1`); the spread table below has that run only.',
        '',
        tables,
        '',
        'Method:',
        `- Micro-benchmark: \`openSnapshot(readSnapshotFiles('catalog', 'rules'))\` once, then \`await evaluatePrice(...)\` ${args['warmup-calls']} times to warm up and ${args.calls} times measured, each call timed alone with \`process.hrtime.bigint()\`. The baseline is the same instant-stream price (250000 + ceil(3 × 20000) + ceil(0 × 15000) atomic) in plain decimal.js, timed by the same loop; run.ts checks both give 310000.`,
        `- HTTP: autocannon (programmatic, in the bench process), ${connections} connections, pipelining 1, one load at a time. Per pair (bare Koa, service): ${warmupSeconds} s discarded warm-up each, then ${rounds} alternating slices of ${durationSeconds / rounds} s (${durationSeconds} s measured per case), so changes in the machine's other load hit both alike. Service: \`node bin/agent-audio.mjs serve\` via test/support/service.ts (temporary DATA_DIR, embedded PostgreSQL); POST /quotes sends the instant-stream body with the bearer key and no Idempotency-Key, so each request stores a quote and an audit record. Baseline: bench/bare-koa.ts (Koa, no router or middleware) in its own process, serving the byte-identical GET /products body and a POST /echo that parses the JSON body and answers ~1.1 kB of JSON.`,
        "- req/s counts 2xx responses; p50/p99 come from autocannon's per-response timings (sub-millisecond). CPU is from /proc: the server process, its children (PostgreSQL backends) and the bench process (autocannon), in cores busy. Load generator, servers and PostgreSQL share the 2 cores with whatever else runs (see load average), so absolute numbers move between runs; the ratios move less.",
      ].join('\n'),
    );
    log('wrote docs/benchmarks.md');
  }

  if (ordersText) {
    if (writeDocs) {
      await writeOrdersDocsSection(
        join(root, 'docs/benchmarks.md'),
        [
          '## Orders: 402 path, paid purchases, chain slowdown',
          '',
          `${machineLine({ ...machine, loadAverageAfter: loadavg() })}.`,
          '',
          ordersText,
          '',
          ...(onlyOrders
            ? [
                `With \`--only orders\`: the tables above are the last of ${repeat} run${repeat === 1 ? '' : 's'} on the same service; over all of them:`,
                '',
                spread,
                '',
              ]
            : []),
          'Method (bench/orders.ts, run by `npm run bench` after the cases above, on the same service process):',
          `- 402 path: autocannon, ${connections} connections, pipelining 1, ${warmupSeconds} s discarded warm-up each, then ${rounds} alternating slices of ${durationSeconds / rounds} s per contender; only 402 answers are counted and timed. Both get the same request: POST /orders with the instant-stream order body, bearer key and one fixed Idempotency-Key (a 402 binds no key), no PAYMENT-SIGNATURE. Service: the real route (authentication, Idempotency-Key, body validation, key lookup in PostgreSQL, pricing, requirements, PAYMENT-REQUIRED). Reference: bench/x402-express-ref.ts in its own process, Express 5 with only \`paymentMiddleware\` from @x402/express protecting \`POST /orders\` at $0.27 (exact, eip155:8453, the service's payTo, 300 s), over an \`x402ResourceServer\` whose facilitator is a local stub that answers getSupported (the only facilitator call of the 402 path, once at start); as in the package's quick start it has no body parser, so the reference never reads the body. Before the load, bench/orders.ts checks both ask for identical terms (270000 atomic USDC at the Base USDC address, same payTo, network, timeout, extra).`,
          `- Paid purchases: before each concurrency level, every purchase gets its own Idempotency-Key, its own 402 and its own PAYMENT-SIGNATURE from the official x402 client (test/support/wallet.ts, dev.json's buyer); then complete paid POST /orders (verify, claim, settle on the embedded chain, provision) run with 1 or 8 in flight, success = 200 with an active order. Bare facilitator: \`createFacilitator({mode: 'embedded', rpcUrl, chainId: 8453, privateKey: DEV_ACCOUNTS[4]})\` in the bench process on the service's anvil (its own gas account, so no nonce clash with the service's facilitator, account 0), no onSettled hook, doing verify then settle of payments signed the same way for the same requirements, with the same concurrency and count. MCP paid tool: the same order as the MCP \`order\` tool (POST /api/v1/mcp, the SDK's Client over Streamable HTTP with the bearer key), each with its own idempotency_key, the PaymentRequired of its own unpaid call and a payload from the official x402 client in \`_meta["x402/payment"]\`; success = a result that is no error with an active order; its target is per second vs the REST purchases of the same run. Seller reference: bench/x402-express-seller-ref.ts in its own process, Express 5 with \`paymentMiddleware\` from @x402/express over an \`x402ResourceServer\` whose facilitator is the same \`createFacilitator\` (embedded) on the service's anvil, paying gas from DEV_ACCOUNTS[5] (used by neither the service, whose refund wallet is [3], nor the bare facilitator), at the service's terms (checked as for the 402 path); the middleware verifies, then the handler (after \`express.json()\`) commits one row to a table of its own (\`bench_reference.orders\`) in the service's embedded PostgreSQL (fsync on) with one INSERT in its own transaction, then the middleware settles and answers 200 with PAYMENT-RESPONSE; each purchase is signed by the same official client for the reference's own 402; success = 200, an active order and a successful PAYMENT-RESPONSE, and the bench checks afterwards that the reference committed a row for each. The four alternate in ${Math.max(1, rounds)} parts (service, MCP, seller reference, bare, service, …); per second = successes / wall time of the timed runs. 3 untimed warm-up purchases of each kind first. Machine CPU per purchase (from /proc, over the timed runs, per success): serve and its children (PostgreSQL, anvil) for the service and the MCP tool, and for the bare facilitator also the bench process it runs in (serve then does only its background work, and anvil mines the bare payments); for the seller reference its process and serve's PostgreSQL and anvil (its processes and their children, by name), not serve; the load generator's own HTTP client is not counted. The next column is each contender's CPU per purchase less the bare facilitator's in the same run; then what the machine's cores would allow at that cost if they did nothing else: when the service's cost per purchase is above the bare facilitator's by more than the target allows, no schedule can meet it on this machine.`,
          `- Chain slowdown: the bare facilitator, sequentially, verify then settle (settle timed alone) of ${args['settle-samples']} pre-signed payments (+3 discarded) at the chain's height after the purchases, then \`anvil_mine\` of ${args['mine-blocks']} empty blocks in one JSON-RPC call, a 1.5 s pause (the service's 1 s ledger checkpoint reads the new blocks), and the same again.`,
        ].join('\n'),
      );
      log('wrote the orders section of docs/benchmarks.md');
    }
  }
  if (!args['no-streaming'] && !onlyOrders) {
    const restart = async () => {
      const { env, dataDir } = service!;
      await service!.stop('SIGINT');
      service = await startService(env, { dataDir });
      return service;
    };
    await runStreamingSection({
      root,
      service,
      scratch,
      signal: abort.signal,
      log,
      machine,
      writeDocs,
      mounts: args['streaming-mounts'],
      restart,
    });
    await runHlsSection(root, writeDocs, abort.signal);
    await runAdmissionSection(root, writeDocs, abort.signal);
  }
} catch (e) {
  exitCode = 1;
  console.error(`bench failed: ${(e as Error).stack ?? e}`);
  if (service && !abort.signal.aborted) console.error(`service output (tail):\n${service.output().slice(-2000)}`);
} finally {
  await bare?.stop().catch((e) => console.error('could not stop bare Koa', e));
  if (service) {
    await service.stop().catch((e) => console.error('could not stop the service', e));
    await rm(service.dataDir, { recursive: true, force: true }).catch(() => undefined);
  }
  if (scratch) await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
  clearTimeout(deadline);
  log(`done in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
}
process.exit(exitCode);

async function expectOk(response: Promise<Response>): Promise<Response> {
  const r = await response;
  if (!r.ok) throw new Error(`${r.url} answered ${r.status}: ${await r.text()}`);
  return r;
}

/** One row per performance target, filled run by run. */
function spreadRows() {
  const pct = (v: number) => `${(v * 100).toFixed(1)} %`;
  const times = (v: number) => `${v.toFixed(2)}×`;
  const num = (unit: string) => (v: number) => `${v < 10 ? v.toFixed(2) : v.toFixed(1)} ${unit}`;
  const row = (name: string, goal: string, format: (v: number) => string, met: (v: number) => boolean): SpreadRow => ({
    name,
    goal,
    values: [],
    format,
    met,
  });
  return {
    evaluate: row(
      'evaluatePrice instant-stream, median',
      `≤ ${httpTargets.evaluateMedianUs} µs`,
      num('µs'),
      (v) => v <= httpTargets.evaluateMedianUs,
    ),
    get: row(
      'GET /products req/s vs bare Koa',
      `≥ ${httpTargets.getRatio * 100} %`,
      pct,
      (v) => v >= httpTargets.getRatio,
    ),
    post: row(
      'POST /quotes req/s vs bare Koa JSON POST',
      `≥ ${httpTargets.postRatio * 100} %`,
      pct,
      (v) => v >= httpTargets.postRatio,
    ),
    postP99: row(
      `POST /quotes p99 at ${connections} connections`,
      `≤ ${httpTargets.postP99Ms} ms`,
      num('ms'),
      (v) => v <= httpTargets.postP99Ms,
    ),
    paywall: row(
      '402 path req/s vs @x402/express',
      `≥ ${ordersTargets.paywallRatio.toFixed(1)}×`,
      times,
      (v) => v >= ordersTargets.paywallRatio,
    ),
    purchases: {} as Record<number, SpreadRow>,
    seller: {} as Record<number, SpreadRow>,
    serviceBeyond: {} as Record<number, SpreadRow>,
    sellerBeyond: {} as Record<number, SpreadRow>,
    mcp: {} as Record<number, SpreadRow>,
  };
}

function purchaseRow(concurrency: number): SpreadRow {
  return {
    name: `paid purchases/s vs bare facilitator, concurrency ${concurrency} (a run with failures counts 0)`,
    goal: `≥ ${ordersTargets.purchaseRatio.toFixed(1)}×`,
    values: [],
    format: (v) => `${v.toFixed(2)}×`,
    met: (v) => v >= ordersTargets.purchaseRatio,
  };
}

function sellerRow(concurrency: number): SpreadRow {
  return {
    name: `paid purchases/s vs seller reference (@x402/express, facilitator, one INSERT), concurrency ${concurrency} (a run where the service failed counts 0, one where the reference failed is left out)`,
    goal: `≥ ${ordersTargets.sellerRatio.toFixed(1)}×`,
    values: [],
    format: (v) => `${v.toFixed(2)}×`,
    met: (v) => v >= ordersTargets.sellerRatio,
  };
}

/** Reported beside the seller target: CPU per purchase beyond the bare facilitator's. */
function beyondRow(who: string, concurrency: number): SpreadRow {
  return {
    name: `${who}: machine CPU per purchase beyond the bare facilitator's, concurrency ${concurrency}`,
    goal: '(reported)',
    values: [],
    format: (v) => `${v.toFixed(1)} ms`,
  };
}

function mcpRow(concurrency: number): SpreadRow {
  return {
    name: `paid MCP tool calls/s vs paid POST /orders, concurrency ${concurrency} (a run with failures counts 0)`,
    goal: `≥ ${ordersTargets.mcpRatio.toFixed(1)}×`,
    values: [],
    format: (v) => `${v.toFixed(2)}×`,
    met: (v) => v >= ordersTargets.mcpRatio,
  };
}

function send(target: LoadTarget): Promise<Response> {
  return fetch(target.url, { method: target.method, headers: target.headers, body: target.body });
}
