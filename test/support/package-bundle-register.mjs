// `--import`ed into each test process by scripts/test.mjs, which builds the bundle (package-bundle.ts) and names its
// map.json in TEST_PACKAGE_BUNDLE_MAP. A test file run on its own (`npx tsx --test test/x.test.ts`) loads the packages
// from node_modules as they are.
import { readFileSync } from 'node:fs';
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';

const mapFile = process.env.TEST_PACKAGE_BUNDLE_MAP;
if (mapFile) {
  const folder = new URL('./', pathToFileURL(mapFile)).href;
  const entries = Object.entries(JSON.parse(readFileSync(mapFile, 'utf8')));
  const map = Object.fromEntries(entries.map(([specifier, [source, file]]) => [specifier, [source, folder + file]]));
  register('./package-bundle-hooks.mjs', import.meta.url, { data: { map, folder } });
}
