// CPU seconds of a command's whole process tree, by kind of process (node tests, serve, CLI; postgres, anvil,
// icecast2, ffmpeg, haproxy, chromium…). Wall time is a poor measure of a test file on a shared two-core machine:
// much of it waits on real time (Icecast's counters, audio played live) and costs nothing. Samples /proc every
// SAMPLE_MS (100) and keeps each descendant's last user+system time, following processes that outlive their parent.
// What the samples miss (processes shorter than a sample, the time between a process's last sample and its exit)
// shows as "unsampled": the difference between what each parent reaped and what was seen of its children.
// Usage: node scripts/cpu-by-process.mjs [--json] COMMAND ARG…   e.g. node scripts/cpu-by-process.mjs npx tsx --test test/x.test.ts
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const ticks = 100; // USER_HZ on Linux
const sampleMs = Number(process.env.SAMPLE_MS ?? 100);
const args = process.argv.slice(2);
const json = args[0] === '--json';
const command = json ? args.slice(1) : args;
if (!command.length) {
  process.stderr.write('usage: node scripts/cpu-by-process.mjs [--json] COMMAND ARG…\n');
  process.exit(2);
}

/** pid → { ppid, self, children, kind, exited } in clock ticks; keyed by pid and start time (pids are reused). */
const seen = new Map();

function stat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
    return { ppid: Number(fields[1]), start: fields[19], self: utime + stime, children: cutime + cstime };
  } catch {
    return undefined;
  }
}

function kindOf(pid) {
  let argv;
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return 'gone';
  }
  const name = (argv[0] ?? '').split('/').pop();
  if (name === 'node' || name === 'tsx') {
    const words = argv.slice(1);
    if (words.some((w) => w.endsWith('scripts/test.mjs') || w.endsWith('scripts/test-files.mjs'))) return 'node runner';
    if (words.includes('serve')) return 'node serve';
    const entry = words.findIndex((w) => /cached-entry|src\/cli|agent-audio\.mjs|bundle\/entry/.test(w));
    if (entry >= 0) {
      const command = words.slice(entry + 1).filter((w) => !w.startsWith('-') && !w.includes('/'));
      return `node CLI ${command.slice(0, 1).join(' ')}`.trim();
    }
    if (words.some((w) => /\.test\.[jt]s$/.test(w) || w.includes('test-files.mjs') || w.includes('--test')))
      return 'node tests';
    return 'node other';
  }
  if (name.startsWith('postgres') || name === 'initdb' || name === 'pg_ctl') return 'postgres';
  if (name.startsWith('chrom') || name.startsWith('chrome')) return 'chromium';
  return name || 'unknown';
}

function sample(rootPid) {
  const stats = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = stat(entry);
    if (s) stats.set(Number(entry), s);
  }
  const live = new Set([...seen.values()].filter((p) => !p.exited).map((p) => p.pid));
  // Until nothing is added: a process started since the last sample may have started its own.
  for (let added = true; added; ) {
    added = false;
    for (const [pid, s] of stats) {
      const key = `${pid}:${s.start}`;
      const known = seen.get(key);
      if (known) Object.assign(known, { self: s.self, children: s.children });
      else if (pid === rootPid || live.has(s.ppid)) {
        seen.set(key, { pid, ppid: s.ppid, self: s.self, children: s.children, kind: kindOf(pid), exited: false });
        live.add(pid);
        added = true;
      }
    }
  }
  for (const [key, p] of seen) if (stats.get(p.pid)?.start !== key.split(':')[1]) p.exited = true;
}

const started = process.hrtime.bigint();
const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
const timer = setInterval(() => sample(child.pid), sampleMs);
sample(child.pid);
const code = await new Promise((resolve) => child.on('close', (c) => resolve(c ?? 1)));
clearInterval(timer);
sample(child.pid);
const wallSeconds = Number(process.hrtime.bigint() - started) / 1e9;

// What each parent reaped beyond what the samples saw of its children: short processes it started.
const byKind = new Map();
const add = (kind, t) => byKind.set(kind, (byKind.get(kind) ?? 0) + t);
// A child's own reaped total may have grown after its last sample: it is at least what was seen of its children.
const exitedChildren = (p) => [...seen.values()].filter((c) => c.ppid === p.pid && c.exited);
const reaped = (p) =>
  Math.max(
    p.children,
    exitedChildren(p).reduce((sum, c) => sum + treeOf(c), 0),
  );
const treeOf = (c) => c.self + reaped(c);
for (const p of seen.values()) {
  add(p.kind, p.self);
  const reapedSeen = exitedChildren(p).reduce((sum, c) => sum + treeOf(c), 0);
  if (p.children > reapedSeen) add(`unsampled (children of ${p.kind})`, p.children - reapedSeen);
}
const total = [...byKind.values()].reduce((a, b) => a + b, 0);
const rows = [...byKind].sort((a, b) => b[1] - a[1]).map(([kind, t]) => ({ kind, cpu_s: t / ticks }));
const counts = {};
for (const p of seen.values()) counts[p.kind] = (counts[p.kind] ?? 0) + 1;
if (json) {
  process.stderr.write(
    `${JSON.stringify({ command, code, wall_s: wallSeconds, cpu_s: total / ticks, rows, counts })}\n`,
  );
} else {
  process.stderr.write(
    `\n${command.join(' ')}: exit ${code}, wall ${wallSeconds.toFixed(1)} s, CPU ${(total / ticks).toFixed(1)} s\n`,
  );
  for (const { kind, cpu_s } of rows)
    process.stderr.write(`  ${cpu_s.toFixed(2).padStart(8)} s  ${kind} (${counts[kind] ?? '-'})\n`);
}
process.exit(code);
