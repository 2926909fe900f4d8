// The CPU of each test file's process, read from the runner's own account: when a child process is reaped, the
// kernel adds its CPU and that of every descendant it waited for to the parent's cutime and cstime
// (/proc/self/stat). Read at each child's exit, the jump since the last read is that child's.
// What escapes: descendants nobody waited for. A process whose parent exits first is adopted by init (or a
// subreaper) and its CPU is added to that process, not to ours: a daemon a test leaves running, or the children of a
// serve killed with SIGKILL before it stopped them (its PostgreSQL, Icecast, anvil). The services tests start stop
// their own children and wait for them, so those are counted (docs/testing.md gives the measured gap).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second, the unit of /proc's times (`getconf CLK_TCK`, 100 on Linux). */
export function clockTicks() {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/** This process's cutime + cstime in ticks: the CPU of the children (and their waited-for descendants) it reaped. */
export function reapedChildrenTicks(stat = readFileSync('/proc/self/stat', 'utf8')) {
  // The command name may hold spaces and parentheses; the fields after its last ')' start at field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[16 - 3]) + Number(fields[17 - 3]);
}

/**
 * Attributes the CPU of child processes to names. Each child's 'exit' comes right after libuv reaped it; children
 * reaped in the same turn of the event loop emit 'exit' one after the other, so the first sees the jump of all of
 * them: such a batch is shared in proportion to the children's wall times, and counted in `shared`.
 */
export function childCpuAccount(readTicks = reapedChildrenTicks, ticksPerSecond = clockTicks()) {
  const seconds = new Map();
  let last = readTicks();
  let batch = [];
  let shared = 0;
  let running = 0;
  let idle = [];
  const settle = () => {
    const total = batch.reduce((sum, exit) => sum + exit.ticks, 0);
    const wall = batch.reduce((sum, exit) => sum + exit.wall, 0);
    if (batch.length > 1) shared += batch.length;
    for (const exit of batch) {
      const share = batch.length === 1 ? total : wall > 0 ? (total * exit.wall) / wall : total / batch.length;
      seconds.set(exit.name, (seconds.get(exit.name) ?? 0) + share / ticksPerSecond);
    }
    batch = [];
    if (running === 0) for (const resolve of idle.splice(0)) resolve();
  };
  return {
    /** Follows a child process, whose CPU is counted under `name` once it exited. */
    track(child, name) {
      const started = performance.now();
      running += 1;
      child.once('exit', () => {
        running -= 1;
        const now = readTicks();
        if (!batch.length) setImmediate(settle);
        batch.push({ name, ticks: now - last, wall: performance.now() - started });
        last = now;
      });
    },
    seconds,
    /** Resolves once every child followed has exited and been counted (node:test's run() may end before). */
    settled: () => new Promise((resolve) => (running === 0 && !batch.length ? resolve() : idle.push(resolve))),
    /** How many children's CPU was shared with others reaped at the same moment. */
    shared: () => shared,
  };
}

/**
 * Makes every process `child_process.spawn` starts from now on counted in `account`, under `nameOf(args)`. node:test's
 * run() starts each file's process with the spawn of this module object, read when its runner is first loaded: call
 * this before importing node:test.
 */
export function trackSpawns(childProcess, account, nameOf) {
  const spawn = childProcess.spawn;
  childProcess.spawn = function trackedSpawn(command, args, ...rest) {
    const child = spawn.call(this, command, args, ...rest);
    account.track(child, nameOf(Array.isArray(args) ? args : []));
    return child;
  };
}
