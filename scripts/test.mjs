// `npm test`: the type, import-cycle and format checks run beside the test files rather than before them. The tests
// do not need the checks' results, and on two cores the test run leaves CPU idle while its services wait on time;
// the checks' half a minute fits there. Every check and every test must pass. Arguments name test files to run
// instead of all of them (`npm test -- test/orders.test.ts`).
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tsImport } from 'tsx/esm/api';

// The files that take longest start first, so that no long file starts last and runs alone at the end (those that took
// 5 s or more in a run on a 2-core machine, slowest first; the others follow in alphabetical order).
const longestFirst = [
  'production-faults',
  'production-deployment',
  'metering-service',
  'host-loss',
  'restart',
  'terminal',
  'metering',
  'faults',
  'reload',
  'listen-page',
  'host-partition',
  'events',
  'autodj',
  'uploads',
  'refund-operator',
  'host-lease',
  'host-pool',
  'capacity',
  'payment-proof',
  'refund-recovery',
  'clients',
  'extend',
  'serve',
  'lifecycle',
  'order-recovery',
  'audit-trail',
  'hls',
  'refunds',
  'upload-abuse',
  'openapi',
  'sign-in-abuse',
  'mcp-clients',
  'catalog-review',
  'buyer-limits',
  'scale-out',
  'fuzz',
  'relay-backoff',
  'statements-per-purchase',
  'orders',
  'connections',
  'hls-expiry',
  'api',
  'sybil',
  'chain',
  'admission',
  'services',
  'mcp',
  'identity',
  'icecast',
  'seller-reference',
  'webhook-secrets',
  'host-monitor',
  'perf-caches',
  'discovery',
  'ssrf',
  'agent',
  'audit-chain-hold',
  'hardening',
  'source-events',
  'catalog',
  'service-holdings',
].map((name) => `test/${name}.test.ts`);

const files = process.argv.slice(2);
const allFiles = readdirSync('test')
  .filter((name) => name.endsWith('.test.ts'))
  .sort()
  .map((name) => `test/${name}`);
const testFiles = files.length
  ? files
  : [...longestFirst.filter((file) => allFiles.includes(file)), ...allFiles.filter((f) => !longestFirst.includes(f))];

const checks = [
  ['tsc', ['-p', '.']],
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

async function runChecks() {
  const results = [];
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
