import assert from 'node:assert/strict';
import { cp, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileStats, isRacy } from '../src/catalog/file-stats.js';
import { LiveSnapshot } from '../src/catalog/live-snapshot.js';
import { copyCatalog } from './support/service.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const PRODUCT = 'products/temporary-autodj.yaml';

/** Rewrites a file with text of the same length and puts its modification time back: only its ctime tells. */
async function sameSizeSameMtime(path: string, from: string, to: string): Promise<void> {
  assert.equal(from.length, to.length);
  const before = await stat(path);
  const text = await readFile(path, 'utf8');
  assert.ok(text.includes(from));
  await writeFile(path, text.replace(from, to));
  await utimes(path, before.atime, before.mtime);
}

describe("the catalog's periodic check", () => {
  test('the stat signature holds while nothing changes and moves with any edit, hidden files aside', async () => {
    const catalog = await copyCatalog();
    const roots = [catalog.catalogDir, catalog.rulesDir];
    const first = fileStats(roots);
    assert.equal(fileStats(roots).signature, first.signature);
    await writeFile(join(catalog.catalogDir, '.editor-swap'), 'x');
    assert.equal(fileStats(roots).signature, first.signature, 'a hidden file is not the catalog');
    await sameSizeSameMtime(join(catalog.catalogDir, PRODUCT), '490000', '490001');
    const edited = fileStats(roots);
    assert.notEqual(edited.signature, first.signature);
    const staging = join(catalog.dir, 'staging');
    await cp(catalog.rulesDir, staging, { recursive: true });
    await rm(catalog.rulesDir, { recursive: true });
    await rename(staging, catalog.rulesDir);
    assert.notEqual(fileStats(roots).signature, edited.signature, 'a directory renamed over a root');
    await catalog.remove();
  });

  test('an entry changed within a second before a read is read again', async () => {
    const catalog = await copyCatalog();
    await writeFile(join(catalog.rulesDir, 'lifecycle.json'), await readFile(join(catalog.rulesDir, 'lifecycle.json')));
    const stats = fileStats([catalog.catalogDir, catalog.rulesDir]);
    assert.equal(isRacy(stats, Date.now()), true);
    assert.equal(isRacy(stats, stats.newestMs + 1001), false);
    await catalog.remove();
  });

  test('an edit no file-system event reports (same size, same mtime) is served by the check', async () => {
    const catalog = await copyCatalog();
    const live = await LiveSnapshot.open(catalog.catalogDir, catalog.rulesDir);
    // Events wait an hour: only the periodic check can serve the edit.
    await live.watch({ debounceMs: 3_600_000, checkIntervalMs: 50 });
    try {
      await sleep(1500);
      const served = () => live.current.files[`catalog/${PRODUCT}`];
      assert.ok(served().includes('490000'));
      await sameSizeSameMtime(join(catalog.catalogDir, PRODUCT), '490000', '490001');
      const deadline = Date.now() + 10_000;
      while (!served().includes('490001')) {
        assert.ok(Date.now() < deadline, 'the edit was not served within 10 s');
        await sleep(20);
      }
    } finally {
      live.close();
      await catalog.remove();
    }
  });
});
