/**
 * The open-files limit a benchmark and everything it starts need (serve's front door holds two descriptors per
 * listener, Icecast one, each listener-clients child its own sockets; HAProxy runs as many processes as the hard
 * limit needs). Node
 * raises its soft limit to the hard one by itself but cannot raise the hard one: when that is too low, the benchmark
 * runs again under `prlimit` if this machine lets it (root with CAP_SYS_RESOURCE), or says what to raise.
 */
import { spawn, spawnSync } from 'node:child_process';

const RERUN = 'BENCH_OPEN_FILES_RAISED';

function hardLimit(): number {
  const out = spawnSync('sh', ['-c', 'ulimit -H -n'], { encoding: 'utf8' }).stdout.trim();
  return out === 'unlimited' ? Number.POSITIVE_INFINITY : Number(out) || 1024;
}

/**
 * Resolves when the limit is enough, or cannot be raised here (saying so); otherwise runs this script again under
 * `prlimit` with `needed` and exits with its code.
 */
export async function ensureOpenFiles(needed: number): Promise<void> {
  const hard = hardLimit();
  if (hard >= needed) return;
  const raisable = spawnSync('prlimit', [`--nofile=${needed}:${needed}`, '--', 'true']).status === 0;
  if (process.env[RERUN] || !raisable) {
    console.error(
      `[open-files] the hard open-files limit is ${hard}, this run needs ${needed}: ` +
        `raise it (\`prlimit --nofile=${needed}:${needed}\` as root with CAP_SYS_RESOURCE, LimitNOFILE, ` +
        `a container's --ulimit nofile) or expect refusals once descriptors run out`,
    );
    return;
  }
  console.error(`[open-files] raising the open-files limit from ${hard} to ${needed} (prlimit) and running again`);
  const child = spawn(
    'prlimit',
    [`--nofile=${needed}:${needed}`, '--', process.execPath, ...process.execArgv, ...process.argv.slice(1)],
    { stdio: 'inherit', env: { ...process.env, [RERUN]: '1' } },
  );
  const code = await new Promise<number>((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
  process.exit(code);
}
