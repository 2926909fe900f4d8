import autocannon from 'autocannon';
import { percentile } from './percentile.js';
import { treeCpu, type TreeCpu } from './process-cpu.js';

export interface LoadTarget {
  url: string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}

/** A server under test: where to send the load, and its process (whose CPU use, and its children's, is reported). */
export interface Contender {
  target: LoadTarget;
  pid?: number;
}

export interface LoadSettings {
  connections: number;
  warmupSeconds: number;
  /** Measured seconds per contender, split into `rounds` alternating slices. */
  durationSeconds: number;
  rounds: number;
  signal: AbortSignal;
  onSlice?: (index: number, round: number) => void;
}

export interface LoadResult {
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** Cores used while measured (1 = one core busy), when measurable: server process, its children, load generator. */
  cpu?: { server: number; children: number; loader: number };
}

/**
 * Loads contenders one at a time, never two at once: a discarded warm-up for each, then `rounds` measured slices
 * in turn (A B A B …), so slow drifts in the machine's other load hit every contender alike.
 * Latencies are recorded per 2xx response from autocannon's own timings (sub-millisecond, unlike its histogram).
 */
export async function compareLoad(contenders: Contender[], settings: LoadSettings): Promise<LoadResult[]> {
  for (const c of contenders) await cannon(c.target, settings.connections, settings.warmupSeconds, settings.signal);
  const totals = contenders.map(() => ({ ok: 0, requests: 0, non2xx: 0, errors: 0, seconds: 0, latencies: [] as number[], server: 0, children: 0, loader: 0, cpuKnown: true }));
  const slice = settings.durationSeconds / settings.rounds;
  for (let round = 0; round < settings.rounds; round++) {
    for (const [i, c] of contenders.entries()) {
      settings.onSlice?.(i, round);
      const t = totals[i];
      const before = c.pid ? await treeCpu(c.pid) : undefined;
      const loaderBefore = process.cpuUsage();
      const started = process.hrtime.bigint();
      const result = await cannon(c.target, settings.connections, slice, settings.signal, t.latencies);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const loader = process.cpuUsage(loaderBefore);
      const after = c.pid ? await treeCpu(c.pid) : undefined;
      t.seconds += seconds;
      t.requests += result.requests.total;
      t.ok += result.requests.total - result.non2xx;
      t.non2xx += result.non2xx;
      t.errors += result.errors;
      t.loader += (loader.user + loader.system) / 1e6;
      if (before && after) addCpu(t, before, after);
      else t.cpuKnown = false;
    }
  }
  return totals.map((t) => {
    const sorted = Float64Array.from(t.latencies).sort();
    return {
      reqPerSec: t.ok / t.seconds,
      p50Ms: percentile(sorted, 0.5),
      p99Ms: percentile(sorted, 0.99),
      requests: t.requests,
      non2xx: t.non2xx,
      errors: t.errors,
      cpu: t.cpuKnown ? { server: t.server / t.seconds, children: t.children / t.seconds, loader: t.loader / t.seconds } : undefined,
    };
  });
}

function addCpu(t: { server: number; children: number }, before: TreeCpu, after: TreeCpu): void {
  t.server += after.self - before.self;
  t.children += Math.max(0, after.descendants - before.descendants);
}

/** One autocannon run, pipelining 1; pushes the latency (ms) of every 2xx response to `latencies` if given. */
function cannon(target: LoadTarget, connections: number, duration: number, signal: AbortSignal, latencies?: number[]): Promise<autocannon.Result> {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => { instance.stop(); reject(signal.reason); };
    const instance = autocannon(
      { url: target.url, method: target.method, headers: target.headers, body: target.body, connections, pipelining: 1, duration, timeout: 10 },
      (err, result) => {
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(result);
      });
    if (latencies) {
      instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
        if (status >= 200 && status < 300) latencies.push(ms);
      });
    }
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
