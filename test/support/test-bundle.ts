import { createHash } from 'node:crypto';
import { readdir, readFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build as esbuild, type Plugin } from 'esbuild';
import { builtOnce } from './build-once.js';
import { esmBundle, importMeta, requireBanner, unbundled } from './prebuilt-cli.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Every test file and what it imports (test/support, src/, the packages) as one esbuild graph, split into shared
 * chunks, for the test processes `npm test` starts: they run it with plain node. Under tsx each test process spent
 * about 0.2 s of CPU on the loader alone (its hooks run in a thread of their own), and more on each module it loaded
 * through them. Each file keeps its own `import.meta.url` (its source's, so paths it builds from it are the
 * repository's) and a source map, so that a failure names the TypeScript line. Built once per machine for these
 * sources (the folder is named by a hash of test/, src/, the lock file, this builder and the checkout's path).
 * `npx tsx --test test/x.test.ts` still runs a file from its source.
 */
export function testBundle(): Promise<string> {
  bundle ??= bundleKey().then((key) => builtOnce(join(tmpdir(), `agent-audio-test-files-${key}`), buildBundle));
  return bundle;
}

let bundle: Promise<string> | undefined;

/** Where the bundle holds a test file (`test/x.test.ts` → `…/test/x.test.js`). */
export function bundledTestFile(folder: string, file: string): string {
  return join(folder, relative(root, join(root, file)).replace(/\.ts$/, '.js'));
}

/** Packages that locate files beside themselves or start programs of their own: imported from node_modules. */
const external = [...unbundled, 'esbuild', 'tsx', 'tsx/*', 'typescript', 'puppeteer-core', 'playwright-core'];

async function filesUnder(folder: string): Promise<string[]> {
  const entries = await readdir(join(root, folder), { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath ?? e.path, e.name)))
    .sort();
}

async function testFiles(): Promise<string[]> {
  return (await readdir(join(root, 'test'))).filter((name) => name.endsWith('.test.ts')).map((name) => `test/${name}`);
}

async function bundleKey(): Promise<string> {
  const hash = createHash('sha256');
  const sources = [...(await filesUnder('test')), ...(await filesUnder('src')), 'package-lock.json', 'tsconfig.json'];
  for (const file of sources) hash.update(`${file}\0${await readFile(join(root, file))}\0`);
  hash.update(`${process.version}\0${root}`); // its node_modules is a link to this checkout's
  return hash.digest('hex').slice(0, 16);
}

async function buildBundle(into: string): Promise<void> {
  await esbuild({
    ...esmBundle,
    entryPoints: (await testFiles()).map((file) => join(root, file)),
    outbase: root,
    outdir: into,
    // Resolve as node does (no "module" condition or field), so each bundled package file is the one node would load.
    conditions: [],
    mainFields: ['main'],
    external,
    plugins: [sourceModuleUrls()],
    banner: requireBanner,
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  await symlink(join(root, 'node_modules'), join(into, 'node_modules'), 'dir');
}

/** Each TypeScript file of the checkout keeps the `import.meta` url, dirname and filename of its source. */
function sourceModuleUrls(): Plugin {
  return {
    name: 'source-module-urls',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
        if (relative(root, path).startsWith('node_modules')) return undefined;
        const text = (await readFile(path, 'utf8'))
          .replaceAll(importMeta('url'), JSON.stringify(pathToFileURL(path).href))
          .replaceAll(importMeta('dirname'), JSON.stringify(dirname(path)))
          .replaceAll(importMeta('filename'), JSON.stringify(path));
        return { contents: text, loader: 'ts' };
      });
    },
  };
}
