import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openSnapshot, readSnapshotFiles, type SnapshotFiles } from '../src/pricing/index.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const product = 'catalog/products/temporary-autodj.yaml';
const settings = 'catalog/catalog.yaml';

const boundProblems = async (files: SnapshotFiles) =>
  (await openSnapshot({ ...files })).diagnostics.filter((d) => d.code === 'price_bounds');

// openSnapshot reuses each product's verdict and price bounds from the snapshot opened before when that product's file,
// the settings and the rules are unchanged: a change of any of them must be judged again.
test('price bounds are checked again when the product, the settings or the rules change', async () => {
  const files = readSnapshotFiles(join(root, 'catalog'), join(root, 'rules'));
  assert.deepEqual(await boundProblems(files), []);

  const dear = { ...files, [product]: files[product].replace('amount_atomic: "6900000"', 'amount_atomic: "69000000"') };
  assert.equal(dear[product] === files[product], false);
  const [tooDear] = await boundProblems(dear);
  assert.equal(tooDear?.file, product);
  assert.match(tooDear.message, /above the order maximum 16\.15/);
  assert.deepEqual(await boundProblems(files), [], 'the product as it was');

  // Only the settings change: every product, unchanged, is judged against the new limits.
  const strict = { ...files, [settings]: files[settings].replace('maximum: "16.15"', 'maximum: "6.5"') };
  assert.equal(strict[settings] === files[settings], false);
  const strictProblems = await boundProblems(strict);
  assert.ok(
    strictProblems.some((d) => d.file === product && /above the order maximum 6\.5/.test(d.message)),
    JSON.stringify(strictProblems),
  );
  assert.deepEqual(await boundProblems(files), [], 'the settings as they were');

  // Only a rules file changes (a whitespace edit): the same products, judged again, with the same result.
  const rulesFile = Object.keys(files).find((path) => path.startsWith('rules/'))!;
  assert.deepEqual(await boundProblems({ ...files, [rulesFile]: `${files[rulesFile]}\n` }), []);
  assert.deepEqual(await boundProblems(dear), [tooDear], 'the dear product again, after other snapshots');
});
