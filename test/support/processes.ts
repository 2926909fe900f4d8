import { readdirSync, readFileSync } from 'node:fs';

/** The programs (by name) of the processes whose command line mentions this directory: an orphan would. */
export function programsUsing(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (args.some((a) => a.includes(dir))) found.push(args[0].split('/').pop()!);
    } catch {
      /* gone */
    }
  }
  return found.sort();
}
