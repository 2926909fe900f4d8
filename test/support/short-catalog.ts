import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { copyCatalog } from './service.js';

/**
 * A catalog copy whose instant-stream can be bought for seconds, so tests see a service expire without waiting an
 * hour: the base price rises to keep the cheapest order at the 0.27 minimum.
 */
export async function shortLivedCatalog() {
  const copy = await copyCatalog();
  const file = join(copy.catalogDir, 'products/instant-stream.yaml');
  const text = await readFile(file, 'utf8');
  await writeFile(
    file,
    text
      .replace('base_atomic: "250000"', 'base_atomic: "270000"')
      .replace(
        'duration_hours: { type: number, required: true, minimum: 1, maximum: 720 }',
        'duration_hours: { type: number, required: true, minimum: 0.0005, maximum: 700 }',
      ),
  );
  return copy;
}
