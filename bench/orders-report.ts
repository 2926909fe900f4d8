import { writeMarkedSection } from './docs.js';
import type { OrdersResults, PurchaseRun } from './orders.js';
import type { LoadResult } from './http-load.js';

export const ordersTargets = {
  /** Service 402 req/s over the @x402/express reference's. */
  paywallRatio: 1.0,
  /** Service paid purchases/s over the bare facilitator's verify+settle/s, at each concurrency. */
  purchaseRatio: 0.8,
  /** Service paid purchases/s over the @x402/express seller reference's (verify, one durable INSERT, settle). */
  sellerRatio: 0.8,
  /** The MCP paid tool call's purchases/s over the same order's over REST POST /orders, at each concurrency. */
  mcpRatio: 0.8,
};

const verdict = (ok: boolean) => (ok ? 'met' : '**MISSED**');

/** The order benchmark's markdown tables: 402 path, paid purchases, chain slowdown, targets. */
export function ordersTables(r: OrdersResults): string {
  const { reference, service } = r.paywall;
  const paywallRatio = service.reqPerSec / reference.reqPerSec;
  const loadRow = (name: string, x: LoadResult, bytes: number, vs?: LoadResult) =>
    `| ${name} | ${Math.round(x.reqPerSec)} | ${ms(x.p50Ms)} | ${ms(x.p99Ms)} | ${x.requests} | ${x.unexpected} / ${x.errors} | ${bytes} | ${cpu(x)} | ${vs ? ratio(x.reqPerSec / vs.reqPerSec) : '—'} |`;

  const purchaseRow = (name: string, x: PurchaseRun, bare: PurchaseRun, vsBare: boolean, seller?: PurchaseRun) =>
    `| ${name} | ${x.concurrency} | ${x.ok} / ${x.attempted} | ${
      x.failed
        ? `${x.failed} (${Object.entries(x.failures)
            .map(([k, n]) => `${n}× ${k}`)
            .join(', ')})`
        : '0'
    } | ${x.perSecond.toFixed(1)} | ${ms(x.p50Ms)} | ${ms(x.p99Ms)} | ${ms(x.cpuMs)} | ${x === bare ? '—' : ms(x.cpuMs - bare.cpuMs)} | ${Number.isFinite(x.cpuMs) ? Math.round((r.cores * 1000) / x.cpuMs) : 'n/a'} | ${vsBare ? ratio(x.perSecond / bare.perSecond) : '—'} | ${seller ? ratio(x.perSecond / seller.perSecond) : '—'} |`;

  const { before, after } = r.slowdown;
  const slowRatio = after.medianMs / before.medianMs;

  return [
    `402 path: POST /orders without PAYMENT-SIGNATURE, ${r.connections} connections, pipelining 1, ${r.durationSeconds} s measured per case (latency of 402 answers):`,
    '',
    '| Case | 402/s | p50 ms | p99 ms | requests | other status / errors | 402 bytes (header + body) | CPU cores: server / its children (PG, anvil) / autocannon | 402/s vs reference |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
    loadRow('reference: @x402/express paymentMiddleware (Express 5)', reference, r.paywall.referenceBytes),
    loadRow('service POST /api/v1/orders', service, r.paywall.serviceBytes, reference),
    '',
    'Paid purchases (each a complete paid POST /orders → 200 active order) vs a bare facilitator doing verify + settle of the same payments on the same chain (commits nothing), and vs a minimal seller on @x402/express with the same facilitator that commits one order row in PostgreSQL per purchase:',
    '',
    `| Case | concurrency | ok / attempted | failed | per second | p50 ms | p99 ms | machine CPU ms per purchase | of which beyond the bare facilitator's | per second if the ${r.cores} cores did only this | per second vs bare facilitator | per second vs seller reference |`,
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...r.purchases.flatMap((p) => [
      purchaseRow('bare facilitator verify + settle', p.bare, p.bare, false),
      purchaseRow(
        'seller reference: @x402/express + facilitator + one INSERT (PostgreSQL, fsync on)',
        p.seller,
        p.bare,
        true,
      ),
      purchaseRow('service paid POST /api/v1/orders', p.service, p.bare, true, p.seller),
      purchaseRow(
        'service paid MCP tool `order` (POST /api/v1/mcp, `_meta["x402/payment"]`)',
        p.mcp,
        p.bare,
        true,
        p.seller,
      ),
    ]),
    '',
    `Chain slowdown: bare facilitator, sequential, ${before.samples} settles per height (after 3 discarded), then \`anvil_mine\` ${r.slowdown.mined} blocks (${r.slowdown.mineMs.toFixed(0)} ms):`,
    '',
    '| Chain height | settle median ms | settle p90 ms | verify median ms | failed | settle median vs start |',
    '|---|--:|--:|--:|--:|--:|',
    `| start of this case: block ${before.blockNumber} | ${ms(before.medianMs)} | ${ms(before.p90Ms)} | ${ms(before.verifyMedianMs)} | ${before.failed} | 1.00× |`,
    `| +${r.slowdown.mined} blocks: block ${after.blockNumber} | ${ms(after.medianMs)} | ${ms(after.p90Ms)} | ${ms(after.verifyMedianMs)} | ${after.failed} | ${ratio(slowRatio)} |`,
    '',
    '| Target | Goal | Measured | Result |',
    '|---|---|--:|---|',
    `| 402 path req/s vs @x402/express reference | ≥ ${ordersTargets.paywallRatio.toFixed(1)}× | ${ratio(paywallRatio)} | ${verdict(paywallRatio >= ordersTargets.paywallRatio)} |`,
    ...r.purchases.map((p) => {
      const x = p.service.perSecond / p.bare.perSecond;
      const clean = p.service.failed === 0;
      return `| paid purchases/s vs bare facilitator, concurrency ${p.concurrency} | ≥ ${ordersTargets.purchaseRatio.toFixed(1)}×, no failures | ${ratio(x)}${clean ? '' : `, ${p.service.failed} failed`} | ${verdict(x >= ordersTargets.purchaseRatio && clean)} |`;
    }),
    ...r.purchases.map((p) => {
      const x = p.service.perSecond / p.seller.perSecond;
      const clean = p.service.failed === 0;
      const beyond = `service CPU beyond the facilitator's ${ms(p.service.cpuMs - p.bare.cpuMs)} ms/purchase, reference's ${ms(p.seller.cpuMs - p.bare.cpuMs)} ms`;
      const failed = [
        p.service.failed && `${p.service.failed} of the service's failed`,
        p.seller.failed && `${p.seller.failed} of the reference's failed`,
      ]
        .filter(Boolean)
        .join(', ');
      const result = !clean
        ? verdict(false)
        : p.seller.failed
          ? 'n/a (the reference failed)'
          : verdict(x >= ordersTargets.sellerRatio);
      return `| paid purchases/s vs seller reference (@x402/express, facilitator, one INSERT), concurrency ${p.concurrency} | ≥ ${ordersTargets.sellerRatio.toFixed(1)}×, no failures | ${ratio(x)}${failed ? `, ${failed}` : ''} (${beyond}) | ${result} |`;
    }),
    ...r.purchases.map((p) => {
      const x = p.mcp.perSecond / p.service.perSecond;
      const clean = p.mcp.failed === 0;
      return `| paid MCP tool calls/s vs paid POST /orders, concurrency ${p.concurrency} | ≥ ${ordersTargets.mcpRatio.toFixed(1)}×, no failures | ${ratio(x)}${clean ? '' : `, ${p.mcp.failed} failed`} | ${verdict(x >= ordersTargets.mcpRatio && clean)} |`;
    }),
    `| settle median after +${r.slowdown.mined} blocks vs start | (reported) | ${ratio(slowRatio)} | — |`,
  ].join('\n');
}

/** Replaces this benchmark's own section in docs/benchmarks.md. */
export function writeOrdersDocsSection(file: string, section: string): Promise<void> {
  return writeMarkedSection(file, 'bench/orders.ts', section);
}

function cpu(r: LoadResult): string {
  if (!r.cpu) return 'n/a';
  return `${r.cpu.server.toFixed(2)} / ${r.cpu.children.toFixed(2)} / ${r.cpu.loader.toFixed(2)}`;
}

function ms(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  return v < 10 ? v.toFixed(2) : v.toFixed(1);
}

function ratio(v: number): string {
  return Number.isFinite(v) ? `${v.toFixed(2)}×` : 'n/a';
}
