import { spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * What this machine offers the servers a host starts, read from the file system rather than by starting a shell for
 * each question (serve asks them at every start).
 */

/** Whether `program` is an executable file in a folder of PATH, as the supervisors that start it find it. */
export function installed(program: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => {
    if (!dir) return false;
    try {
      accessSync(join(dir, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
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
