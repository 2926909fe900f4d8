/**
 * Process start cost: CPU of a `serve` start to ready and of the CLI commands the tests run most, each the
 * median of several runs, beside the CPU of `node -e ""` measured in the same rounds (the machine is shared: compare
 * the ratios). Runs the prebuilt entry the tests run (test/support/prebuilt-cli.ts).
 *
 * How CPU is read (Linux /proc): a CLI command's CPU is the growth of this process's cutime + cstime across its run
 * (the kernel adds a child's user and system time, and that of the children it reaped, when it is reaped; nothing else
 * ends meanwhile). serve's is read from /proc at "ready": its own utime + stime, and separately that of its descendants
 * (PostgreSQL, anvil, Icecast).
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { prebuiltEntry } from '../test/support/prebuilt-cli.js';
import { request, startService, type Service } from '../test/support/service.js';
import { writeMarkedSection } from './docs.js';
import { treeCpu } from './process-cpu.js';

const ticksPerSecond = 100; // USER_HZ on Linux

interface Case {
  name: string;
  /** CPU ms of one run. */
  run(): Promise<number>;
}

/** CPU seconds of this process's children that were reaped so far (cutime + cstime). */
async function reapedChildrenCpuMs(): Promise<number> {
  const text = await readFile('/proc/self/stat', 'utf8');
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return ((Number(rest[13]) + Number(rest[14])) / ticksPerSecond) * 1000;
}

/** Runs node with these arguments to its end and returns the CPU ms it (and what it reaped) used. */
async function childCpuMs(args: string[], env: Record<string, string>, root: string): Promise<number> {
  const before = await reapedChildrenCpuMs();
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stderr }));
  });
  if (code !== 0 && code !== 3) throw new Error(`node ${args.join(' ')} exited with ${code}:\n${stderr}`);
  return (await reapedChildrenCpuMs()) - before;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** One serve start to "serving on": its own CPU and its descendants', then stopped. */
async function serveStart(): Promise<{ self: number; below: number; wall: number }> {
  const began = performance.now();
  const service = await startService();
  const wall = performance.now() - began;
  try {
    const cpu = await treeCpu(service.process.pid!);
    if (!cpu) throw new Error('no /proc entry for serve');
    return { self: cpu.self * 1000, below: cpu.descendants * 1000, wall };
  } finally {
    await service.stop();
  }
}

function cliCases(entry: string[], service: Service, root: string): Case[] {
  const cli = (args: string[]) => () => childCpuMs([...entry, ...args], service.env, root);
  let keys = 0;
  return [
    { name: 'node -e ""', run: () => childCpuMs(['-e', ''], {}, root) },
    { name: '--help', run: cli(['--help']) },
    { name: 'catalog check', run: cli(['catalog', 'check']) },
    { name: 'catalog diff', run: cli(['catalog', 'diff']) },
    { name: 'keys create', run: () => cli(['keys', 'create', '--name', `bench-${++keys}`])() },
    { name: 'audit verify', run: cli(['audit', 'verify']) },
    { name: 'audit replay --all', run: cli(['audit', 'replay', '--all']) },
  ];
}

export interface StartupOptions {
  root: string;
  runs: number;
  writeDocs: boolean;
  log(line: string): void;
}

export async function runStartupSection(options: StartupOptions): Promise<void> {
  const { root, runs, log } = options;
  const entry = await prebuiltEntry();
  const samples = new Map<string, number[]>();
  const add = (name: string, ms: number) => samples.set(name, [...(samples.get(name) ?? []), ms]);
  const service = await startService();
  try {
    // One quote, so that audit replay and verify have an evaluation record to work on.
    const quote = await request(service, 'POST', '/quotes', {
      body: { product_id: 'instant-stream', parameters: { duration_hours: 3, max_listeners: 5, bitrate_kbps: 64 } },
    });
    if (quote.status !== 200) throw new Error(`POST /quotes answered ${quote.status}`);
    const cases = cliCases(entry, service, root);
    for (let round = 1; round <= runs; round++) {
      log(`startup: CLI round ${round} of ${runs}`);
      for (const c of cases) add(c.name, await c.run());
    }
  } finally {
    await service.stop();
  }
  for (let round = 1; round <= runs; round++) {
    log(`startup: serve start ${round} of ${runs}`);
    add('node -e "" (serve rounds)', await childCpuMs(['-e', ''], {}, root));
    const { self, below, wall } = await serveStart();
    add('serve start to ready: wall ms (template copy included)', wall);
    add('serve start to ready: serve itself', self);
    add('serve start to ready: its PostgreSQL, anvil, Icecast', below);
  }
  const table = startupTable(samples, runs);
  console.log(table);
  if (options.writeDocs) {
    await writeMarkedSection(join(root, 'docs/benchmarks.md'), 'bench/startup.ts', table);
    log('wrote the startup section of docs/benchmarks.md');
  }
}

function startupTable(samples: Map<string, number[]>, runs: number): string {
  const cliBase = median(samples.get('node -e ""') ?? [NaN]);
  const serveBase = median(samples.get('node -e "" (serve rounds)') ?? [NaN]);
  const rows = [...samples].map(([name, values]) => {
    const base = name.startsWith('serve') || name.includes('(serve rounds)') ? serveBase : cliBase;
    const ms = median(values);
    const each = values.map((v) => v.toFixed(0)).join(', ');
    return `| ${name} | ${ms.toFixed(0)} | ${(ms / base).toFixed(1)}× | ${each} |`;
  });
  return [
    '## Process start cost: latest run (`npm run bench -- --only startup`)',
    '',
    `CPU (user + system, from /proc) of one process run of the prebuilt entry the tests start, median of ${runs};`,
    'ratio to `node -e ""` measured in the same rounds. The CLI commands run against one running service (after one',
    'quote); each serve start is on a fresh copy of the migrated template DATA_DIR, measured at "serving on".',
    '',
    '| process | CPU ms (median) | × node -e "" | runs (ms) |',
    '|---|---:|---:|---|',
    ...rows,
  ].join('\n');
}
