import autocannon from 'autocannon';
import type { LoadTarget } from './http-load.js';
import { percentile } from './percentile.js';
import { treeCpu, type TreeCpu } from './process-cpu.js';

/**
 * Like http-load.ts's compareLoad, but each contender names the status that counts as a good answer (e.g. 402 for
 * the "payment required" path): req/s and latencies count those responses only, anything else is reported as wrong.
 */
export interface StatusContender {
  target: LoadTarget;
  /** The answer expected from every request (402 for an unpaid POST /orders). */
  expectStatus: number;
  pid?: number;
}

export interface StatusLoadSettings {
  connections: number;
  warmupSeconds: number;
  /** Measured seconds per contender, split into `rounds` alternating slices. */
  durationSeconds: number;
  rounds: number;
  signal: AbortSignal;
  onSlice?: (index: number, round: number) => void;
}

export interface StatusLoadResult {
  /** Responses with the expected status, per second. */
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  /** Responses with another status. */
  wrongStatus: number;
  errors: number;
  /** Cores used while measured: server process, its children (PostgreSQL, anvil), load generator. */
  cpu?: { server: number; children: number; loader: number };
}

/** A discarded warm-up for each contender, then `rounds` measured slices in turn (A B A B …), never two at once. */
export async function compareStatusLoad(contenders: StatusContender[], settings: StatusLoadSettings): Promise<StatusLoadResult[]> {
  for (const c of contenders) await cannon(c.target, c.expectStatus, settings.connections, settings.warmupSeconds, settings.signal);
  const totals = contenders.map(() => ({ good: 0, requests: 0, wrong: 0, errors: 0, seconds: 0, latencies: [] as number[], server: 0, children: 0, loader: 0, cpuKnown: true }));
  const slice = settings.durationSeconds / settings.rounds;
  for (let round = 0; round < settings.rounds; round++) {
    for (const [i, c] of contenders.entries()) {
      settings.onSlice?.(i, round);
      const t = totals[i];
      const before = c.pid ? await treeCpu(c.pid) : undefined;
      const loaderBefore = process.cpuUsage();
      const started = process.hrtime.bigint();
      const run = await cannon(c.target, c.expectStatus, settings.connections, slice, settings.signal, t.latencies);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const loader = process.cpuUsage(loaderBefore);
      const after = c.pid ? await treeCpu(c.pid) : undefined;
      t.seconds += seconds;
      t.requests += run.result.requests.total;
      t.good += run.good;
      t.wrong += run.wrong;
      t.errors += run.result.errors;
      t.loader += (loader.user + loader.system) / 1e6;
      if (before && after) addCpu(t, before, after);
      else t.cpuKnown = false;
    }
  }
  return totals.map((t) => {
    const sorted = Float64Array.from(t.latencies).sort();
    return {
      reqPerSec: t.good / t.seconds,
      p50Ms: percentile(sorted, 0.5),
      p99Ms: percentile(sorted, 0.99),
      requests: t.requests,
      wrongStatus: t.wrong,
      errors: t.errors,
      cpu: t.cpuKnown ? { server: t.server / t.seconds, children: t.children / t.seconds, loader: t.loader / t.seconds } : undefined,
    };
  });
}

function addCpu(t: { server: number; children: number }, before: TreeCpu, after: TreeCpu): void {
  t.server += after.self - before.self;
  t.children += Math.max(0, after.descendants - before.descendants);
}

/** One autocannon run, pipelining 1, counting answers by status; latencies (ms) of expected answers go to `latencies`. */
function cannon(target: LoadTarget, expectStatus: number, connections: number, duration: number, signal: AbortSignal, latencies?: number[]): Promise<{ result: autocannon.Result; good: number; wrong: number }> {
  signal.throwIfAborted();
  let good = 0;
  let wrong = 0;
  return new Promise((resolve, reject) => {
    const onAbort = () => { instance.stop(); reject(signal.reason); };
    const instance = autocannon(
      { url: target.url, method: target.method, headers: target.headers, body: target.body, connections, pipelining: 1, duration, timeout: 10 },
      (err, result) => {
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve({ result, good, wrong });
      });
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status === expectStatus) {
        good++;
        latencies?.push(ms);
      } else {
        wrong++;
      }
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
