import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { bundledSpecifiers, packageBundle } from './support/package-bundle.js';

const run = promisify(execFile);
const register = fileURLToPath(new URL('./support/package-bundle-register.mjs', import.meta.url));

/** Where each bundled specifier resolves in a tsx process like npm test's, with or without the bundle's map. */
async function resolvedIn(mapFile: string | undefined): Promise<Record<string, string>> {
  const code = `console.log(JSON.stringify(Object.fromEntries(${JSON.stringify(bundledSpecifiers)}
    .map((specifier) => [specifier, import.meta.resolve(specifier)]))))`;
  const env = { ...process.env, TEST_PACKAGE_BUNDLE_MAP: mapFile };
  if (!mapFile) delete env.TEST_PACKAGE_BUNDLE_MAP;
  const args = ['--import', 'tsx', '--import', register, '--input-type=module', '-e', code];
  const { stdout } = await run(process.execPath, args, { env, cwd: fileURLToPath(new URL('..', import.meta.url)) });
  return JSON.parse(stdout);
}

test('npm test loads every listed package entry point from the bundle, a file run alone from node_modules', async () => {
  const folder = await packageBundle();
  const bundled = await resolvedIn(join(folder, 'map.json'));
  const own = await resolvedIn(undefined);
  for (const specifier of bundledSpecifiers) {
    assert.ok(fileURLToPath(bundled[specifier]).startsWith(`${folder}/`), `${specifier}: ${bundled[specifier]}`);
    assert.match(own[specifier], /\/node_modules\//, specifier);
  }
});
