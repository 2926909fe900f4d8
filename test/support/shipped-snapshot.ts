import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openSnapshot, readSnapshotFiles, type Snapshot } from '../../src/pricing/index.js';
import { root } from './service.js';

/** The shipped catalog and rules opened as serve opens them, which must open without a single diagnostic. */
export async function shippedSnapshot(): Promise<Snapshot> {
  const opened = await openSnapshot(readSnapshotFiles(join(root, 'catalog'), join(root, 'rules')));
  assert.deepEqual(opened.diagnostics, []);
  return opened.snapshot!;
}
