/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and sums the self time of its samples by function, optionally only the
 * samples taken between two moments of the monotonic clock (process.hrtime, the clock V8 stamps samples with).
 * npx tsx bench/cpu-profile-summary.ts FILE [fromMicros toMicros] [top]
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTime {
  name: string;
  ms: number;
  share: number;
}

export interface ProfileSummary {
  /** Milliseconds of samples in the window, idle included. */
  windowMs: number;
  /** Milliseconds not idle (program, GC and functions). */
  busyMs: number;
  top: SelfTime[];
  /** Time with the function anywhere on the stack (each sample counted once per function). */
  inclusive: SelfTime[];
}

const IDLE = new Set(['(idle)']);

/** Self time by function (name, file and line) over the samples between `from` and `to` (µs, monotonic). */
export function summarize(profile: CpuProfile, from = -Infinity, to = Infinity, top = 30): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keyOf = (n: ProfileNode) =>
    `${n.callFrame.functionName || '(anonymous)'} ${basename(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  const selfMs = new Map<string, number>();
  const inclusiveMs = new Map<string, number>();
  let at = profile.startTime;
  let windowMs = 0;
  let busyMs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i];
    const next = profile.timeDeltas[i + 1] ?? 0;
    if (at < from || at > to) continue;
    const ms = next / 1000;
    const node = byId.get(profile.samples[i])!;
    windowMs += ms;
    if (!IDLE.has(node.callFrame.functionName)) busyMs += ms;
    selfMs.set(keyOf(node), (selfMs.get(keyOf(node)) ?? 0) + ms);
    const onStack = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) onStack.add(keyOf(byId.get(id)!));
    for (const key of onStack) inclusiveMs.set(key, (inclusiveMs.get(key) ?? 0) + ms);
  }
  const sorted = (m: Map<string, number>) =>
    [...m]
      .filter(([k]) => !k.startsWith('(idle)') && !k.startsWith('(root)'))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, ms]) => ({ name, ms, share: busyMs > 0 ? ms / busyMs : 0 }));
  return { windowMs, busyMs, top: sorted(selfMs), inclusive: sorted(inclusiveMs) };
}

export async function summarizeFile(path: string, from?: number, to?: number, top?: number): Promise<ProfileSummary> {
  return summarize(JSON.parse(await readFile(path, 'utf8')) as CpuProfile, from, to, top);
}

const line = (t: SelfTime) =>
  `${t.ms.toFixed(0).padStart(7)} ms ${(t.share * 100).toFixed(1).padStart(5)} %  ${t.name}`;

export function formatSummary(s: ProfileSummary): string {
  return [
    `window ${(s.windowMs / 1000).toFixed(1)} s, busy ${(s.busyMs / 1000).toFixed(2)} s`,
    'self time:',
    ...s.top.map(line),
    'inclusive time:',
    ...s.inclusive.map(line),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [file, from, to, top] = process.argv.slice(2);
  const s = await summarizeFile(file, from ? Number(from) : undefined, to ? Number(to) : undefined, Number(top ?? 30));
  console.log(formatSummary(s));
}
