import { readdirSync, readFileSync } from 'node:fs';

/**
 * The programs (by name) of the processes whose command line mentions this directory: an orphan would. A process
 * with its parent's very command line is left out: a fork that has not renamed itself yet (PostgreSQL's backends do, a
 * moment after their fork).
 */
export function programsUsing(dir: string): string[] {
  const matching = new Map<string, { name: string; parent: string; line: string }>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const line = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const args = line.split('\0');
      if (!args.some((a) => a.includes(dir))) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const parent = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      matching.set(pid, { name: args[0].split('/').pop()!, parent, line });
    } catch {
      /* gone */
    }
  }
  return [...matching.values()]
    .filter(({ parent, line }) => matching.get(parent)?.line !== line)
    .map(({ name }) => name)
    .sort();
}

/** The processes a process started (Icecast, the capture's ffmpeg, ...), and theirs, with their program names. */
export function descendantsOf(pid: number): Array<{ pid: number; name: string }> {
  const parents = new Map<number, number[]>();
  const names = new Map<number, string>();
  for (const entry of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      names.set(Number(entry), stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')));
      parents.set(parent, [...(parents.get(parent) ?? []), Number(entry)]);
    } catch {
      /* gone */
    }
  }
  const found: Array<{ pid: number; name: string }> = [];
  const walk = (parent: number) => {
    for (const child of parents.get(parent) ?? []) {
      found.push({ pid: child, name: names.get(child)! });
      walk(child);
    }
  };
  walk(pid);
  return found;
}
