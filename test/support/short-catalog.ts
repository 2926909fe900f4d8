import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { copyCatalog, startService } from './service.js';

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

/**
 * A service on a short-lived catalog copy (edited first by `adjust`), its life-cycle worker looking every 250 ms so an
 * expiry shows at once, `env` on top; with the environment it was started with, to start it again.
 */
export async function startShortLivedService(
  env: Record<string, string> = {},
  adjust: (catalogDir: string) => Promise<void> = async () => {},
) {
  const catalog = await shortLivedCatalog();
  await adjust(catalog.catalogDir);
  const started = {
    CATALOG_DIR: catalog.catalogDir,
    RULES_DIR: catalog.rulesDir,
    LIFECYCLE_INTERVAL_MS: '250',
    ...env,
  };
  return { catalog, env: started, service: await startService(started) };
}
