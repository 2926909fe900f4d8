import { createHash } from 'node:crypto';
import { readFile, symlink, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build as esbuild, type Plugin } from 'esbuild';
import { builtOnce } from './build-once.js';
import { requireBanner } from './prebuilt-cli.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The package entry points that test files, and the src/ modules they load, import by name: each is served from one
 * esbuild bundle in the test processes `npm test` starts (see package-bundle-hooks.mjs). Under tsx, node spends about
 * a millisecond of CPU per module on the loader hooks, and viem, @x402/* and the MCP SDK are a thousand modules; the
 * bundle is a few dozen. Packages that find files next to themselves or are native stay out (bundledPackages).
 */
export const bundledSpecifiers = [
  'viem',
  'viem/accounts',
  'viem/chains',
  'viem/nonce',
  '@noble/curves/secp256k1',
  '@x402/core/client',
  '@x402/core/facilitator',
  '@x402/core/http',
  '@x402/core/server',
  '@x402/evm',
  '@x402/evm/exact/client',
  '@x402/evm/exact/facilitator',
  '@x402/evm/exact/server',
  '@x402/extensions/bazaar',
  '@x402/extensions/offer-receipt',
  '@x402/extensions/payment-identifier',
  '@x402/extensions/sign-in-with-x',
  '@x402/fetch',
  '@modelcontextprotocol/sdk/client/index.js',
  '@modelcontextprotocol/sdk/client/streamableHttp.js',
  '@modelcontextprotocol/sdk/types.js',
  // @x402/core and the MCP SDK use zod, and so do packages left out (x402, ai, x402-mcp's own MCP SDK): every entry
  // point of zod is here, so that all of them share one copy of it.
  'zod',
  'zod/v3',
  'zod/v4',
  'zod/v4-mini',
  'zod/v4/mini',
  'zod/v4/core',
  'zod-to-json-schema',
];

/**
 * The ES-module packages copied into the bundle. Any other package the bundle imports (CommonJS ones such as ajv, and
 * whatever locates files relative to itself) is left as an import, resolved from this checkout's node_modules.
 */
const bundledPackages = [
  ...['viem', 'ox', 'abitype', 'zod', 'zod-to-json-schema', 'jose', '@modelcontextprotocol/sdk'],
  ...['@noble/', '@scure/', '@signinwithethereum/', '@x402/'], // every package of these scopes
];
const isBundled = (name: string) => bundledPackages.some((p) => (p.endsWith('/') ? name.startsWith(p) : name === p));

/** specifier → [the file node resolves it to, the bundled file that replaces it, relative to map.json] */
export type BundleMap = Record<string, [string, string]>;

/** The folder holding the bundle and its map.json (a BundleMap), built once per machine for this package-lock. */
export function packageBundle(): Promise<string> {
  bundle ??= bundleKey().then((key) => builtOnce(join(tmpdir(), `agent-audio-test-packages-${key}`), buildBundle));
  return bundle;
}

let bundle: Promise<string> | undefined;

async function bundleKey(): Promise<string> {
  const hash = createHash('sha256');
  const sources = ['package-lock.json', 'test/support/package-bundle.ts', 'test/support/package-bundle-hooks.mjs'];
  for (const file of sources) hash.update(`${file}\0${await readFile(join(root, file))}\0`);
  hash.update(`${process.version}\0${root}`); // its node_modules is a link to this checkout's
  return hash.digest('hex').slice(0, 16);
}

async function buildBundle(into: string): Promise<void> {
  const sources = bundledSpecifiers.map((specifier) => fileURLToPath(import.meta.resolve(specifier)));
  const entryPoints = sources.map((source, i) => ({ in: source, out: `entry-${i}` }));
  await esbuild({
    entryPoints,
    outdir: into,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: `node${process.versions.node.split('.')[0]}`,
    // Resolve as node does (no "module" condition or field), so each bundled file is the one node would load.
    conditions: [],
    mainFields: ['main'],
    plugins: [unbundledPackagesExternal()],
    // CommonJS modules inside bundled packages call require for node's built-in modules.
    banner: requireBanner,
    logLevel: 'warning',
  });
  await symlink(join(root, 'node_modules'), join(into, 'node_modules'), 'dir');
  const map: BundleMap = {};
  bundledSpecifiers.forEach((specifier, i) => {
    map[specifier] = [pathToFileURL(sources[i]).href, `entry-${i}.mjs`];
  });
  await writeFile(join(into, 'map.json'), JSON.stringify(map, null, 2));
}

/**
 * Imports of packages outside bundledPackages stay imports, when node would find the same package from the bundle's
 * folder (its node_modules links to the checkout's); a package's own nested copy of a dependency is bundled instead.
 */
function unbundledPackagesExternal(): Plugin {
  return {
    name: 'unbundled-packages-external',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === 'resolving') return undefined;
        const name = packageName(args.path);
        if (args.path.startsWith('node:') || !name) return { path: args.path, external: true };
        if (isBundled(name)) return undefined;
        const resolved = await build.resolve(args.path, {
          kind: args.kind,
          resolveDir: args.resolveDir,
          importer: args.importer,
          pluginData: 'resolving',
        });
        if (resolved.errors.length) return undefined;
        if (!resolved.path.startsWith(join(root, 'node_modules', name, '/'))) return undefined;
        return { path: args.path, external: true };
      });
    },
  };
}

/** The package a bare specifier names ('@scope/name' or 'name'), or undefined for a built-in module of node. */
function packageName(specifier: string): string | undefined {
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return builtinModules.includes(name) ? undefined : name;
}
