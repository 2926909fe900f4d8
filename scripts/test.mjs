// `npm test`: the type, import-cycle and format checks run beside the test files rather than before them. The tests
// do not need the checks' results, and on two cores the test run leaves CPU idle while its services wait on time;
// the checks' half a minute fits there. Every check and every test must pass. Arguments name test files to run
// instead of all of them (`npm test -- test/orders.test.ts`), and then the checks are left to `npm run typecheck`.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tsImport } from 'tsx/esm/api';
import { readCpu, readTimes, slowestFirst } from './test-order.mjs';
import { timesTable } from './times-table.mjs';

const args = process.argv.slice(2);
// --times: the kept wall and CPU of each file (test/file-times.json), slowest first, and nothing run.
if (args.includes('--times')) {
  process.stdout.write(timesTable(readTimes().times, readCpu()));
  process.exit(0);
}
// --list: the files in the order they would start, and nothing run.
const listOnly = args.includes('--list');
const files = args.filter((arg) => arg !== '--list');
const allFiles = readdirSync('test')
  .filter((name) => name.endsWith('.test.ts'))
  .sort()
  .map((name) => `test/${name}`);
// The files that take longest start first, by the times earlier runs measured (scripts/test-order.mjs); a run of
// every file measures them again.
const testFiles = files.length ? files : slowestFirst(allFiles, readTimes().times);
if (!files.length) process.env.TEST_FILE_TIMES = 'record';
if (listOnly) {
  process.stdout.write(`${testFiles.join('\n')}\n`);
  process.exit(0);
}

// tsc keeps what it checked in node_modules/.cache (ignored by git): a run after the first checks what changed and
// what depends on it, about 14 s of CPU where a whole check costs 50.
const checks = [
  ['tsc', ['-p', '.', '--incremental', '--tsBuildInfoFile', 'node_modules/.cache/agent-audio/tsc.tsbuildinfo']],
  ['dpdm', ['--no-warning', '--no-tree', '--exit-code', 'circular:1', 'src/**/*.ts']],
  ['biome', ['format', '.']],
];

/** Runs a command; its output is kept for the end (captured) or goes straight through. */
function run(command, args, captured) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: captured ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    let output = '';
    if (captured) for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk) => (output += chunk));
    child.on('error', (error) => resolve({ command, code: 1, output: `${output}${error.message}\n` }));
    child.on('close', (code) => resolve({ command, code: code ?? 1, output }));
  });
}

// Named files run without the checks: a whole-project type check per run of one file costs more than the file.
async function runChecks() {
  const results = [];
  if (files.length) return results;
  for (const [command, args] of checks) results.push(await run(command, args, true));
  return results;
}

// The test processes run the test files from one prebuilt bundle with plain node rather than through tsx's loader
// (test/support/test-bundle.ts); their source maps name the TypeScript lines.
const { testBundle, bundledTestFile } = await tsImport('../test/support/test-bundle.ts', import.meta.url);
const unknown = testFiles.filter((file) => !allFiles.includes(file.replace(/^\.\//, '')));
if (unknown.length) {
  process.stderr.write(
    `npm test runs the files test/NAME.test.ts; not ${unknown.join(', ')} (npx tsx --test FILE runs any)\n`,
  );
  process.exit(2);
}

// A service a test starts lives for seconds and serves a few dozen requests: V8's optimizing compiler spent about a
// fifth of its CPU (0.24 s of 1.2 s per start) on start-up code that would never run hot again, and a quarter of a CLI
// command's. The interpreter and the baseline compiler run the same code.
process.env.TEST_NODE_FLAGS = '--no-opt';

const [checkResults, tests] = await Promise.all([
  runChecks(),
  testBundle().then((folder) =>
    run(
      'node',
      [
        '--enable-source-maps',
        'scripts/test-files.mjs',
        folder,
        process.env.TEST_CONCURRENCY ?? '5',
        ...testFiles.map((file) => bundledTestFile(folder, file)),
      ],
      false,
    ),
  ),
]);

let failed = tests.code !== 0;
for (const { command, code, output } of checkResults) {
  process.stdout.write(`\n${command}: ${code === 0 ? 'passed' : `FAILED (exit ${code})`}\n`);
  if (code !== 0) {
    process.stdout.write(output);
    failed = true;
  }
}
if (failed) process.stdout.write('\nnpm test: FAILED (see above)\n');
process.exit(failed ? 1 : 0);
