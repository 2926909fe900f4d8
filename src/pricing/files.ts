import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/** The catalog and rules as they were read: path ("catalog/products/x.yaml", "rules/pricing.json") → text. */
export type SnapshotFiles = Record<string, string>;

/**
 * Reads both folders with synchronous calls: a running service checks them twice a second, and for these few small
 * local files the asynchronous calls (a thread-pool round trip for each open, stat, read and close) cost about eight
 * times the CPU: a third of an idle instance's. A check blocks for about 0.3 ms.
 */
export function readSnapshotFiles(catalogDir: string, rulesDir: string): SnapshotFiles {
  const files: SnapshotFiles = {};
  for (const [prefix, dir, pattern] of [
    ['catalog', catalogDir, /\.ya?ml$/],
    ['rules', rulesDir, /\.json$/],
  ] as const) {
    for (const path of listFiles(dir)) {
      if (!pattern.test(path)) continue;
      files[`${prefix}/${relative(dir, path).split(sep).join('/')}`] = readFileSync(path, 'utf8');
    }
  }
  return files;
}

function listFiles(dir: string): string[] {
  const entries = readdirSync(dir, { withFileTypes: true });
  const nested = entries.map((e) => {
    const path = join(dir, e.name);
    if (e.name.startsWith('.')) return [];
    return e.isDirectory() ? listFiles(path) : e.isFile() ? [path] : [];
  });
  return nested.flat().sort();
}

/** Content hash of a snapshot: sha256 over every path and text, in path order. */
export function snapshotHash(files: SnapshotFiles): string {
  const hash = createHash('sha256');
  for (const path of Object.keys(files).sort()) {
    hash.update(path).update('\0').update(files[path]).update('\0');
  }
  return `sha256:${hash.digest('hex')}`;
}
