import { readdir, readFile } from 'node:fs/promises';

/**
 * CPU seconds used so far by a process and, separately, by all its descendants (Linux /proc; undefined elsewhere).
 * Descendants that ended count too, through their parents' cutime/cstime (a PostgreSQL backend that exits during a
 * measurement would otherwise take its CPU out of the sum, which could then go down).
 */
export interface TreeCpu { self: number; descendants: number }

const ticksPerSecond = 100; // USER_HZ on Linux

export async function treeCpu(pid: number): Promise<TreeCpu | undefined> {
  let names: string[];
  try {
    names = await readdir('/proc');
  } catch {
    return undefined;
  }
  const stats = new Map<number, { ppid: number; cpu: number; reaped: number }>();
  await Promise.all(names.filter((n) => /^\d+$/.test(n)).map(async (n) => {
    try {
      const text = await readFile(`/proc/${n}/stat`, 'utf8');
      // Fields after "(comm)": state ppid ... utime(14) stime(15) cutime(16) cstime(17), counting from 1 at pid.
      const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(n), { ppid: Number(rest[1]), cpu: (Number(rest[11]) + Number(rest[12])) / ticksPerSecond, reaped: (Number(rest[13]) + Number(rest[14])) / ticksPerSecond });
    } catch { /* the process ended meanwhile */ }
  }));
  const root = stats.get(pid);
  if (!root) return undefined;
  let descendants = root.reaped;
  const queue = [pid];
  while (queue.length) {
    const parent = queue.pop()!;
    for (const [child, s] of stats) {
      if (s.ppid === parent) {
        descendants += s.cpu + s.reaped;
        queue.push(child);
      }
    }
  }
  return { self: root.cpu, descendants };
}
