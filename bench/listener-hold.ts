/**
 * What the listener-capacity benchmark measures on any data plane: a burst of listeners opened at once (who was
 * admitted, how fast, who refused) and then what holding them costs (CPU of named process groups from /proc) and
 * whether each received its stream in real time.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ListenerFleet, Opened } from './listener-fleet.js';

export interface Burst {
  listeners: number;
  admitted: number;
  /** Refusals by status or error. */
  refused: Record<string, number>;
  /** Seconds from the open until the last admitted listener's answer. */
  allAdmittedSeconds: number;
  p50Seconds: number;
  p90Seconds: number;
}

export interface Held {
  seconds: number;
  /** Admitted listeners that received ≥ 95 % of the bitrate over the hold. */
  realTime: number;
  /** The slowest admitted listener's bytes over the hold, as a share of the bitrate. */
  slowest: number;
  /** Per process group: % of one core over the hold. */
  cores: Record<string, number>;
}

export type CpuSampler = () => Promise<Record<string, number>>;

export function summarizeBurst(opened: Opened): Burst {
  const admittedAt = opened.answers
    .filter((a) => a.status === 200)
    .map((a) => (a.at - opened.sentAt) / 1000)
    .sort((x, y) => x - y);
  const refused: Record<string, number> = {};
  for (const a of opened.answers.filter((x) => x.status !== 200)) {
    const key = a.status ? String(a.status) : String(a.error);
    refused[key] = (refused[key] ?? 0) + 1;
  }
  return {
    listeners: opened.answers.length,
    admitted: admittedAt.length,
    refused,
    allAdmittedSeconds: admittedAt.at(-1) ?? Number.NaN,
    p50Seconds: admittedAt[Math.floor(admittedAt.length * 0.5)] ?? Number.NaN,
    p90Seconds: admittedAt[Math.floor(admittedAt.length * 0.9)] ?? Number.NaN,
  };
}

export const refusedCount = (b: Burst) => Object.values(b.refused).reduce((n, k) => n + k, 0);

/** % of one core per process group over the next `seconds`. */
export async function coresOver(
  cpu: CpuSampler,
  seconds: number,
): Promise<{ cores: Record<string, number>; seconds: number }> {
  const [c0, t0] = [await cpu(), performance.now()];
  await sleep(seconds * 1000);
  const [c1, t1] = [await cpu(), performance.now()];
  const window = (t1 - t0) / 1000;
  const cores: Record<string, number> = {};
  for (const k of Object.keys(c1)) cores[k] = ((c1[k] - c0[k]) / window) * 100;
  return { cores, seconds: window };
}

/** Holds the admitted listeners of `opened` for `seconds` and measures them against `bytesPerSecond`. */
export async function holdListeners(
  fleet: ListenerFleet,
  opened: Opened,
  seconds: number,
  bytesPerSecond: number,
  cpu: CpuSampler,
): Promise<Held> {
  const slots = opened.slots.filter((_, i) => opened.answers[i].status === 200);
  await sleep(2000); // past the burst-on-connect every new listener gets
  const [bytes0, cpu0, t0] = [await fleet.bytes(), await cpu(), performance.now()];
  await sleep(seconds * 1000);
  const [bytes1, cpu1, t1] = [await fleet.bytes(), await cpu(), performance.now()];
  const window = (t1 - t0) / 1000;
  const shares = slots.map((s) => ((bytes1.get(s) ?? 0) - (bytes0.get(s) ?? 0)) / window / bytesPerSecond);
  const cores: Record<string, number> = {};
  for (const k of Object.keys(cpu1)) cores[k] = ((cpu1[k] - cpu0[k]) / window) * 100;
  return {
    seconds: window,
    realTime: shares.filter((s) => s >= 0.95).length,
    slowest: shares.length ? Math.min(...shares) : Number.NaN,
    cores,
  };
}
