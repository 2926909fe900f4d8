// Loader hooks for the test processes of `npm test` (registered by package-bundle-register.mjs): an import of one of
// the bundled package entry points (package-bundle.ts) gets the bundled file instead, whoever imports it, when node
// would have loaded that package's own file (not another version of the package nested elsewhere).
import { readFile } from 'node:fs/promises';

/** @type {Record<string, [string, string]>} specifier → [the file node resolves it to, its bundled replacement] */
let map = {};
/** The bundle's folder (a file: URL ending in '/'). */
let folder = '';

export function initialize(data) {
  map = data.map;
  folder = data.folder;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  const entry = Object.hasOwn(map, specifier) ? map[specifier] : undefined;
  if (entry && resolved.url === entry[0]) return { url: entry[1], format: 'module', shortCircuit: true };
  return resolved;
}

/** The bundle is plain JavaScript built for this node: it is loaded as it is, without tsx's transform. */
export async function load(url, context, nextLoad) {
  if (!url.startsWith(folder)) return nextLoad(url, context);
  return { format: 'module', source: await readFile(new URL(url)), shortCircuit: true };
}
