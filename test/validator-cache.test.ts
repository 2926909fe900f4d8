import assert from 'node:assert/strict';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { productFileSchema } from '../src/catalog/schemas.js';
import { orderRequestSchema } from '../src/http/schemas.js';
import { cachedValidator } from '../src/schema/validator-cache.js';
import { root, scratchDir } from './support/service.js';

/** Counts Ajv compiles while `use` runs. */
async function compilesDuring(use: () => Promise<void> | void): Promise<number> {
  let count = 0;
  const compile = Ajv2020.prototype.compile;
  Ajv2020.prototype.compile = function (this: Ajv2020, ...args: Parameters<typeof compile>) {
    count += 1;
    return compile.apply(this, args);
  } as typeof compile;
  try {
    await use();
  } finally {
    Ajv2020.prototype.compile = compile;
  }
  return count;
}

// Beside the real cache: its code requires Ajv's runtime from node_modules, found from there.
const cacheRoot = join(root, 'node_modules/.cache');
const badProduct = { id: 'x', name: 3, unknown_key: true };
const order = { product_id: 'instant-stream', parameters: {} };

interface Verdict {
  valid: boolean;
  errors: unknown;
  filled: unknown;
}

/** A product file's verdict and an order's defaults, from validators made with the cache in `dir`. */
function judge(dir: string): Verdict {
  const validate = cachedValidator(productFileSchema, {}, dir)();
  const withDefaults = cachedValidator(orderRequestSchema, { useDefaults: true }, dir)();
  const filled = structuredClone(order);
  withDefaults(filled);
  return { valid: validate(badProduct), errors: validate.errors, filled };
}

test('a validator is compiled once per machine: the next process loads its code and judges the same', async () => {
  await mkdir(cacheRoot, { recursive: true });
  const dir = await scratchDir('validator-cache-test-', cacheRoot);
  let first: Verdict | undefined;
  const compiles = await compilesDuring(() => {
    first = judge(dir);
  });
  assert.equal(compiles, 2);
  assert.equal((await readdir(dir)).filter((f) => f.endsWith('.cjs')).length, 2);
  assert.equal(first?.valid, false);

  let again: Verdict | undefined;
  const recompiles = await compilesDuring(() => {
    again = judge(dir);
  });
  assert.equal(recompiles, 0, 'loaded from the cache, not compiled');
  assert.deepEqual(again, first);
  assert.notDeepEqual(first?.filled, order, 'the order schema fills in defaults, from the cache too');
});

test('a cache file that is not valid code is compiled again and replaced', async () => {
  await mkdir(cacheRoot, { recursive: true });
  const dir = await scratchDir('validator-cache-test-', cacheRoot);
  cachedValidator(productFileSchema, {}, dir)();
  const [file] = await readdir(dir);
  await writeFile(join(dir, file), 'module.exports = (');
  let valid: boolean | undefined;
  const compiles = await compilesDuring(() => {
    valid = cachedValidator(productFileSchema, {}, dir)()(badProduct);
  });
  assert.equal(compiles, 1);
  assert.equal(valid, false);
  const compilesAfter = await compilesDuring(() => void cachedValidator(productFileSchema, {}, dir)());
  assert.equal(compilesAfter, 0);
});
