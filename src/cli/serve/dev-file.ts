import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiKeys } from '../../keys/index.js';
import type { Config } from '../config.js';

/** Development mode: a working agent API key in DATA_DIR/dev.json, so a newcomer can call the API at once. */
export async function writeDevFile(
  config: Config,
  keys: ApiKeys,
  fields: { base_url: string } & Record<string, unknown>,
): Promise<{ file: string; apiKey: string }> {
  const file = join(config.dataDir, 'dev.json');
  let previous: { api_key?: string } = {};
  try {
    previous = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    /* first start */
  }
  const apiKey =
    previous.api_key && (await keys.verify(previous.api_key))
      ? previous.api_key
      : (await keys.create('development')).token;
  await writeFile(file, `${JSON.stringify({ ...fields, api_key: apiKey }, null, 2)}\n`, { mode: 0o600 });
  return { file, apiKey };
}
