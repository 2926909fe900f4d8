import { ApiKeys } from '../../src/keys/index.js';
import { Database } from '../../src/store/index.js';
import type { Service } from './service.js';
import { serveLock } from './serve-lock.js';

/**
 * A new API key on the running service's database, made by the call `keys create --name NAME` makes, without the
 * process the CLI costs: for tests that need a second key, not the command (test/serve.test.ts and others run it).
 * The same fields as the command prints.
 */
export async function createApiKey(service: Service, name: string): Promise<{ id: string; api_key: string }> {
  const lock = await serveLock(service);
  const db = new Database(lock.database_url, { max: 1 });
  try {
    const { key, token } = await new ApiKeys(db).create(name);
    return { id: key.id, api_key: token };
  } finally {
    await db.close();
  }
}
