import { readdir, readFile } from 'node:fs/promises';

/**
 * CPU seconds used so far by a process and, separately, by all its descendants (Linux /proc; undefined elsewhere).
 * Descendants that ended count too, through their parents' cutime/cstime (a PostgreSQL backend that exits during a
 * measurement would otherwise take its CPU out of the sum, which could then go down).
 */
export interface TreeCpu {
  self: number;
  descendants: number;
}

const ticksPerSecond = 100; // USER_HZ on Linux

interface ProcStat {
  comm: string;
  ppid: number;
  cpu: number;
  reaped: number;
}

async function readStats(): Promise<Map<number, ProcStat> | undefined> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return undefined;
  }
  const stats = new Map<number, ProcStat>();
  await Promise.all(
    names
      .filter((n) => /^\d+$/.test(n))
      .map(async (n) => {
        try {
          const text = await readFile(`/proc/${n}/stat`, 'utf8');
          // Fields after "(comm)": state ppid ... utime(14) stime(15) cutime(16) cstime(17), counting from 1 at pid.
          const comm = text.slice(text.indexOf('(') + 1, text.lastIndexOf(')'));
          const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
          const ticks = (i: number) => Number(rest[i]) / ticksPerSecond;
          stats.set(Number(n), {
            comm,
            ppid: Number(rest[1]),
            cpu: ticks(11) + ticks(12),
            reaped: ticks(13) + ticks(14),
          });
        } catch {
          /* the process ended meanwhile */
        }
      }),
  );
  return stats;
}

/** CPU of every process below `pid` (and of its descendants that ended), not `pid`'s own. */
function belowCpu(stats: Map<number, ProcStat>, pid: number): number {
  let sum = 0;
  const queue = [pid];
  while (queue.length) {
    const parent = queue.pop()!;
    for (const [child, s] of stats) {
      if (s.ppid === parent) {
        sum += s.cpu + s.reaped;
        queue.push(child);
      }
    }
  }
  return sum;
}

export async function treeCpu(pid: number): Promise<TreeCpu | undefined> {
  const stats = await readStats();
  const root = stats?.get(pid);
  if (!stats || !root) return undefined;
  return { self: root.cpu, descendants: root.reaped + belowCpu(stats, pid) };
}

/**
 * CPU of the processes below `pid` whose command name is one of `names`, each with all its descendants (e.g. serve's
 * PostgreSQL with its backends, and its anvil under a watchdog shell), without `pid` itself or other processes.
 */
export async function namedTreesCpu(pid: number, names: readonly string[]): Promise<number | undefined> {
  const stats = await readStats();
  if (!stats?.has(pid)) return undefined;
  let sum = 0;
  const queue = [pid];
  while (queue.length) {
    const parent = queue.pop()!;
    for (const [child, s] of stats) {
      if (s.ppid !== parent) continue;
      if (names.includes(s.comm)) sum += s.cpu + s.reaped + belowCpu(stats, child);
      else queue.push(child);
    }
  }
  return sum;
}
