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
  /** The status every answer should have (402 for an unpaid POST /orders); by default any 2xx. */
  expectStatus?: number;
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
  /** Answers with the expected status, per second. */
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** Answers with another status. */
  unexpected: number;
  errors: number;
  /** Cores used while measured (1 = one core busy), when measurable: server process, its children, load generator. */
  cpu?: { server: number; children: number; loader: number };
}

/**
 * Loads contenders one at a time, never two at once: a discarded warm-up for each, then `rounds` measured slices
 * in turn (A B A B …), so slow drifts in the machine's other load hit every contender alike.
 * Latencies are recorded per expected answer from autocannon's own timings (sub-millisecond, unlike its histogram).
 */
export async function compareLoad(contenders: Contender[], settings: LoadSettings): Promise<LoadResult[]> {
  for (const c of contenders) await cannon(c, settings.connections, settings.warmupSeconds, settings.signal);
  const totals = contenders.map(() => ({
    ok: 0,
    requests: 0,
    unexpected: 0,
    errors: 0,
    seconds: 0,
    latencies: [] as number[],
    server: 0,
    children: 0,
    loader: 0,
    cpuKnown: true,
  }));
  const slice = settings.durationSeconds / settings.rounds;
  for (let round = 0; round < settings.rounds; round++) {
    for (const [i, c] of contenders.entries()) {
      settings.onSlice?.(i, round);
      const t = totals[i];
      const before = c.pid ? await treeCpu(c.pid) : undefined;
      const loaderBefore = process.cpuUsage();
      const started = process.hrtime.bigint();
      const run = await cannon(c, settings.connections, slice, settings.signal, t.latencies);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const loader = process.cpuUsage(loaderBefore);
      const after = c.pid ? await treeCpu(c.pid) : undefined;
      t.seconds += seconds;
      t.requests += run.result.requests.total;
      t.ok += run.expected;
      t.unexpected += run.unexpected;
      t.errors += run.result.errors;
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
      unexpected: t.unexpected,
      errors: t.errors,
      cpu: t.cpuKnown
        ? { server: t.server / t.seconds, children: t.children / t.seconds, loader: t.loader / t.seconds }
        : undefined,
    };
  });
}

function addCpu(t: { server: number; children: number }, before: TreeCpu, after: TreeCpu): void {
  t.server += after.self - before.self;
  t.children += Math.max(0, after.descendants - before.descendants);
}

/** One autocannon run, pipelining 1, counting answers by status; latencies (ms) of expected answers go to `latencies`. */
function cannon(
  contender: Contender,
  connections: number,
  duration: number,
  signal: AbortSignal,
  latencies?: number[],
): Promise<{ result: autocannon.Result; expected: number; unexpected: number }> {
  signal.throwIfAborted();
  const { target, expectStatus } = contender;
  const isExpected = (status: number) =>
    expectStatus === undefined ? status >= 200 && status < 300 : status === expectStatus;
  let expected = 0;
  let unexpected = 0;
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      instance.stop();
      reject(signal.reason);
    };
    const instance = autocannon(
      {
        url: target.url,
        method: target.method,
        headers: target.headers,
        body: target.body,
        connections,
        pipelining: 1,
        duration,
        timeout: 10,
      },
      (err, result) => {
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve({ result, expected, unexpected });
      },
    );
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (isExpected(status)) {
        expected++;
        latencies?.push(ms);
      } else {
        unexpected++;
      }
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
