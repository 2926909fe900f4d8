import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { builtOnce } from './build-once.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The CLI's entry (src/cli/entry.ts) as JavaScript, for the `serve` and CLI processes the tests start by the hundred.
 * Each file of src/ is transformed on its own by esbuild, as tsx does when bin/agent-audio.mjs runs it, and laid out as
 * in the repository (its SQL, contracts, package.json and node_modules beside it), so the code that runs is the same;
 * what is saved is tsx's loader, which costs a process about 2 s of CPU to load the service's modules. Built once per
 * machine for this source and checkout (the folder is named by a hash of src/, package.json and the checkout's
 * path). The tests that start bin/agent-audio.mjs itself (terminal.test.ts) keep the real entry covered.
 */
export function prebuiltEntry(): Promise<string> {
  entry ??= sourceKey()
    .then((key) => builtOnce(join(tmpdir(), `agent-audio-test-build-${key}`), transformSources))
    .then((dir) => join(dir, 'src/cli/entry.js'));
  return entry;
}

let entry: Promise<string> | undefined;

async function sourceFiles(): Promise<string[]> {
  const entries = await readdir(join(root, 'src'), { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath ?? e.path, e.name)))
    .sort();
}

async function sourceKey(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of [...(await sourceFiles()), 'package.json', 'tsconfig.json']) {
    hash.update(`${file}\0${await readFile(join(root, file))}\0`);
  }
  hash.update(`${process.version}\0${root}`); // its node_modules is a link to this checkout's
  return hash.digest('hex').slice(0, 16);
}

async function transformSources(into: string): Promise<void> {
  const files = await sourceFiles();
  const typescript = files.filter((f) => f.endsWith('.ts'));
  await build({
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
