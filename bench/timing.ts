import { percentile } from './percentile.js';

/** Per-call timing of an (a)sync function with process.hrtime.bigint: warm-up calls first, then measured calls. */
export interface TimingStats {
  calls: number;
  medianUs: number;
  p99Us: number;
  meanUs: number;
}

export async function timeCalls(fn: () => unknown, warmup: number, measured: number): Promise<TimingStats> {
  for (let i = 0; i < warmup; i++) await fn();
  const samples = new Float64Array(measured);
  for (let i = 0; i < measured; i++) {
    const started = process.hrtime.bigint();
    await fn();
    samples[i] = Number(process.hrtime.bigint() - started);
  }
  samples.sort();
  let sum = 0;
  for (const s of samples) sum += s;
  return {
    calls: measured,
    medianUs: percentile(samples, 0.5) / 1000,
    p99Us: percentile(samples, 0.99) / 1000,
    meanUs: sum / measured / 1000,
  };
}
