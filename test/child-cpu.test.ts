import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { childCpuAccount, reapedChildrenTicks } from '../scripts/child-cpu.mjs';
import { readCpu, readTimes, writeTimes } from '../scripts/test-order.mjs';
import { runSummary, timesTable } from '../scripts/times-table.mjs';

/** Burns this much CPU (user time), whatever the load, then exits. */
const burn = (ms: number) => `const t=process.cpuUsage();while(process.cpuUsage(t).user<${ms * 1000});`;

async function exited(account: ReturnType<typeof childCpuAccount>, name: string, command: string, args: string[]) {
  const child = spawn(command, args, { stdio: 'ignore' });
  account.track(child, name);
  await once(child, 'exit');
  await new Promise((resolve) => setImmediate(resolve));
}

test("each child's CPU, its waited-for descendants' included, is counted under its name", async () => {
  const account = childCpuAccount();
  await exited(account, 'burner', process.execPath, ['-e', burn(250)]);
  await exited(account, 'sleeper', 'sh', ['-c', 'sleep 0.4']);
  // The shell waits for its node: the grandchild's burn is the shell's.
  await exited(account, 'parent', 'sh', ['-c', `${process.execPath} -e '${burn(200)}'`]);
  const seconds = Object.fromEntries(account.seconds);
  assert.ok(seconds.burner >= 0.24 && seconds.burner < 2, `burner ${seconds.burner} s`);
  assert.ok(seconds.sleeper < 0.1, `sleeper ${seconds.sleeper} s`);
  assert.ok(seconds.parent >= 0.19 && seconds.parent < 2, `parent ${seconds.parent} s`);
  assert.equal(account.shared(), 0);
});

test('children reaped in the same turn share the jump by their wall times', async () => {
  let ticks = 1000;
  const account = childCpuAccount(() => ticks, 100);
  const [a, b] = [new EventEmitter(), new EventEmitter()];
  account.track(a, 'a');
  await new Promise((resolve) => setTimeout(resolve, 60));
  account.track(b, 'b');
  await new Promise((resolve) => setTimeout(resolve, 20));
  ticks += 300;
  a.emit('exit');
  b.emit('exit');
  await new Promise((resolve) => setImmediate(resolve));
  const { a: aSeconds, b: bSeconds } = Object.fromEntries(account.seconds);
  assert.ok(Math.abs(aSeconds + bSeconds - 3) < 1e-9, `${aSeconds} + ${bSeconds}`);
  assert.ok(aSeconds > 2 * bSeconds, 'the longer child gets the larger share');
  assert.equal(account.shared(), 2);
});

test("/proc's stat is read after the command name, which may hold spaces and parentheses", () => {
  const fields = Array.from({ length: 50 }, (_, i) => String(i + 1));
  fields[15] = '120';
  fields[16] = '30';
  const stat = `4242 (node (x) y) ${fields.slice(2).join(' ')}`;
  assert.equal(reapedChildrenTicks(stat), 150);
  assert.ok(Number.isInteger(reapedChildrenTicks()));
});

test('the table of kept times and the end of a run say how busy the cores were', () => {
  const table = timesTable(
    new Map([
      ['test/a.test.ts', 2000],
      ['test/b.test.ts', 9000],
    ]),
    new Map([['test/b.test.ts', 4500]]),
  );
  const lines = table.trim().split('\n');
  assert.match(lines[1], /^\s+9\.0\s+4\.5\s+0\.50\s+test\/b\.test\.ts$/);
  assert.match(lines[2], /^\s+2\.0\s+-\s+test\/a\.test\.ts$/);
  assert.match(lines[3], /11\.0\s+4\.5\s+sum over 2 files/);
  const summary = runSummary({ wallMs: 100_000, fileWallMs: 400_000, cpuMs: 150_000, cores: 2 });
  assert.match(summary, /100\.0 s wall, 400\.0 s .* 150\.0 s .* = 0\.75/);
});

test('the kept file holds each CPU beside the wall times, which the run order reads as before', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'child-cpu-'));
  try {
    const path = join(dir, 'times.json');
    writeTimes({ 'test/a.test.ts': 2000 }, path, { 'test/a.test.ts': 900 });
    assert.deepEqual(readCpu(path), new Map([['test/a.test.ts', 900]]));
    assert.deepEqual(readTimes(path).times, new Map([['test/a.test.ts', 2000]]));
    writeTimes({ 'test/a.test.ts': 2000 }, path);
    assert.deepEqual(readCpu(path), new Map());
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
