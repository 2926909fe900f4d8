import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';

/** The catalog and rules as they were read: path ("catalog/products/x.yaml", "rules/pricing.json") → text. */
export type SnapshotFiles = Record<string, string>;

export async function readSnapshotFiles(catalogDir: string, rulesDir: string): Promise<SnapshotFiles> {
  const files: SnapshotFiles = {};
  for (const [prefix, dir, pattern] of [
    ['catalog', catalogDir, /\.ya?ml$/],
    ['rules', rulesDir, /\.json$/],
  ] as const) {
    for (const path of await listFiles(dir)) {
      if (!pattern.test(path)) continue;
      files[`${prefix}/${relative(dir, path).split(sep).join('/')}`] = await readFile(path, 'utf8');
    }
  }
  return files;
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) => {
      const path = join(dir, e.name);
      if (e.name.startsWith('.')) return [];
      return e.isDirectory() ? listFiles(path) : e.isFile() ? [path] : [];
    }),
  );
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
