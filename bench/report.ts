import type { LoadResult } from './http-load.js';
import type { MicroResults } from './micro.js';
import type { TimingStats } from './timing.js';

export interface Machine {
  date: string;
  cores: number;
  loadAverage: number[];
  /** Read again once the load cases are done: other work on the machine shows up here. */
  loadAverageAfter?: number[];
  node: string;
  cpu: string;
}

export interface HttpResults {
  connections: number;
  durationSeconds: number;
  bareGet: LoadResult;
  serviceGet: LoadResult;
  barePost: LoadResult;
  servicePost: LoadResult;
}

/** The performance targets' table: ratios to the same-run references. */
export const targets = {
  evaluateMedianUs: 20,
  getRatio: 0.8,
  postRatio: 0.3,
  postP99Ms: 15,
};

export function machineLine(m: Machine): string {
  const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(' ');
  const after = m.loadAverageAfter ? `, ${load(m.loadAverageAfter)} after` : '';
  return `${m.date} · ${m.cores} cores (${m.cpu}) · load average ${load(m.loadAverage)} before${after} · Node ${m.node}`;
}

/** The three markdown tables: micro-benchmark, HTTP, targets. */
export function reportTables(micro: MicroResults, http: HttpResults): string {
  const base = micro.baseline.medianUs;
  const microRow = (name: string, t: TimingStats, ratio: string) =>
    `| ${name} | ${us(t.medianUs)} | ${us(t.p99Us)} | ${us(t.meanUs)} | ${ratio} |`;
  const times = (t: TimingStats) => `${(t.medianUs / base).toFixed(1)}×`;

  const httpRow = (name: string, r: LoadResult, vs?: LoadResult) =>
    `| ${name} | ${Math.round(r.reqPerSec)} | ${ms(r.p50Ms)} | ${ms(r.p99Ms)} | ${r.requests} | ${r.unexpected} / ${r.errors} | ${cpu(r)} | ${vs ? pct(r.reqPerSec / vs.reqPerSec) : '—'} |`;

  const getRatio = http.serviceGet.reqPerSec / http.bareGet.reqPerSec;
  const postRatio = http.servicePost.reqPerSec / http.barePost.reqPerSec;
  const verdict = (ok: boolean) => (ok ? 'met' : '**MISSED**');

  return [
    `Quote evaluation, ${micro.instantStream.calls} measured calls each (µs per call):`,
    '',
    '| Case | median µs | p99 µs | mean µs | median vs baseline |',
    '|---|--:|--:|--:|--:|',
    microRow('timer + await overhead (empty call)', micro.overhead, '—'),
    microRow('baseline: hand-written decimal.js, instant-stream', micro.baseline, '1.0×'),
    microRow('evaluatePrice instant-stream', micro.instantStream, times(micro.instantStream)),
    microRow('evaluatePrice temporary-autodj', micro.temporaryAutodj, times(micro.temporaryAutodj)),
    '',
    `HTTP, ${http.connections} connections, pipelining 1, ${http.durationSeconds} s measured per case (latency of 2xx responses):`,
    '',
    '| Case | req/s | p50 ms | p99 ms | requests | non-2xx / errors | CPU cores: server / its children (PG) / autocannon | req/s vs bare Koa |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
    httpRow('bare Koa GET /products', http.bareGet),
    httpRow('service GET /api/v1/products', http.serviceGet, http.bareGet),
    httpRow('bare Koa POST /echo (JSON)', http.barePost),
    httpRow('service POST /api/v1/quotes', http.servicePost, http.barePost),
    '',
    '| Target | Goal | Measured | Result |',
    '|---|---|--:|---|',
    `| evaluatePrice instant-stream, median | ≤ ${targets.evaluateMedianUs} µs | ${us(micro.instantStream.medianUs)} µs | ${verdict(micro.instantStream.medianUs <= targets.evaluateMedianUs)} |`,
    `| GET /products req/s vs bare Koa route | ≥ ${targets.getRatio * 100} % | ${pct(getRatio)} | ${verdict(getRatio >= targets.getRatio)} |`,
    `| POST /quotes req/s vs bare Koa JSON POST | ≥ ${targets.postRatio * 100} % | ${pct(postRatio)} | ${verdict(postRatio >= targets.postRatio)} |`,
    `| POST /quotes p99 at ${http.connections} connections | ≤ ${targets.postP99Ms} ms | ${ms(http.servicePost.p99Ms)} ms | ${verdict(http.servicePost.p99Ms <= targets.postP99Ms)} |`,
  ].join('\n');
}

function cpu(r: LoadResult): string {
  if (!r.cpu) return 'n/a';
  return `${r.cpu.server.toFixed(2)} / ${r.cpu.children.toFixed(2)} / ${r.cpu.loader.toFixed(2)}`;
}

function ms(v: number): string {
  return v < 10 ? v.toFixed(2) : v.toFixed(1);
}

function us(v: number): string {
  return v < 10 ? v.toFixed(2) : v.toFixed(1);
}

function pct(v: number): string {
  return `${(v * 100).toFixed(1)} %`;
}
