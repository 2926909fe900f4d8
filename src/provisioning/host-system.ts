import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * What this machine offers the servers a host starts. serve asks at every start: what a file says is read from the
 * file rather than from a shell started for each question.
 */

/** Whether `program` is on this machine's PATH, as the supervisors that start it find it. */
export function installed(program: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${program}`]).status === 0;
}

/** The hard limit of open files a server started by serve may raise its own limit to (1,024 when unknown). */
export function openFilesHardLimit(): number {
  return fromProcLimits() ?? fromShell() ?? 1024;
}

// Linux: "Max open files            1024                 20000                files".
function fromProcLimits(): number | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').match(/^Max open files\s+\S+\s+(\S+)/m);
    if (!line) return undefined;
    return line[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(line[1]) || undefined;
  } catch {
    return undefined;
  }
}

function fromShell(): number | undefined {
  const out = spawnSync('sh', ['-c', 'ulimit -H -n'], { encoding: 'utf8' }).stdout?.trim();
  if (out === 'unlimited') return Number.MAX_SAFE_INTEGER;
  return Number(out) || undefined;
}
