import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { cli, root, startService } from './support/service.js';
import { prebuiltEntry, requireBanner } from './support/prebuilt-cli.js';
import { waitFor } from './support/streaming.js';
import { bundledTestFile, testBundle } from './support/test-bundle.js';

const run = promisify(execFile);

test("a test file sees its own source's URL, bundled (npm test) or not, and strings keep their words", async () => {
  assert.equal(fileURLToPath(import.meta.url), join(root, 'test/test-bundle.test.ts'));
  // The rewrite of import.meta in the bundle leaves a string that spells it in parts alone (the test bundle's banner).
  assert.match(requireBanner.js, /bundleRequire\(import\.meta\.url\)/);
  const manifest = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  assert.equal(manifest.name, 'agent-audio-api');
});

test('the bundle holds every test file, with a source map naming its source, and runs one with plain node', async () => {
  const folder = await testBundle();
  const files = (await readdir(join(root, 'test'))).filter((name) => name.endsWith('.test.ts'));
  for (const name of files) {
    const map = JSON.parse(await readFile(`${bundledTestFile(folder, `test/${name}`)}.map`, 'utf8'));
    assert.ok(
      map.sources.some((source: string) => source.endsWith(`test/${name}`)),
      `${name}: ${map.sources.slice(0, 3)}`,
    );
  }
  const bundled = bundledTestFile(folder, 'test/batched-calls.test.ts');
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // in a test process, node:test would report to its parent instead
  const { stdout } = await run(process.execPath, ['--enable-source-maps', '--test-reporter=tap', bundled], { env });
  assert.match(stdout, /^ok 1 - BatchedCalls$/m); // execFile would have failed on a failing test's exit code
  assert.doesNotMatch(stdout, /^\s*not ok/m);
});

test('serve saves the code cache once it serves; a CLI run starts from it and loads what the bundle imports at run time', {
  timeout: 120_000,
}, async () => {
  const service = await startService();
  try {
    const [, bundle] = await prebuiltEntry();
    const cached = async () =>
      (await readdir(dirname(bundle))).some(
        // The facilitator command's cache is a separate one (cached-entry.cjs).
        (name) =>
          name.startsWith(`${basename(bundle)}.`) && name.endsWith('.v8-cache') && !name.includes('.facilitator.'),
      );
    await waitFor('the code cache', cached, 30_000);
    // The store's import of the embedded PostgreSQL binaries is a dynamic one, which a cached function cannot make.
    const listed = await cli(['keys', 'list'], { ...service.env, CACHED_ENTRY_REPORT: '1' });
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stderr, /^code cache: used$/m);
    assert.ok(JSON.parse(listed.stdout).length >= 1, listed.stdout);
  } finally {
    await service.stop();
  }
});
