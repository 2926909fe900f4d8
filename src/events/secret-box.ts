import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

const SEALED = 'sealed:v1:';
const KEY_FILE = 'webhook-secrets.key';

/**
 * Webhook signing secrets at rest: AES-256-GCM under WEBHOOK_SECRETS_KEY, bound to their endpoint's id, so that a copy
 * of the database alone does not let anyone sign deliveries. (They cannot be hashed like API keys: signing needs them.)
 * A value without the sealed prefix is a secret stored before sealing existed, read as it is until it is sealed.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error(`a secrets key has 32 bytes, this one ${key.length}`);
  }

  seal(secret: string, endpointId: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(endpointId));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return `${SEALED}${[iv, sealed, cipher.getAuthTag()].map((part) => part.toString('base64url')).join('.')}`;
  }

  open(stored: string, endpointId: string): string {
    if (!isSealed(stored)) return stored;
    const [iv, sealed, tag] = stored
      .slice(SEALED.length)
      .split('.')
      .map((part) => Buffer.from(part, 'base64url'));
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, iv).setAAD(Buffer.from(endpointId)).setAuthTag(tag);
      return Buffer.concat([decipher.update(sealed), decipher.final()]).toString('utf8');
    } catch {
      throw new Error(
        `the secret of webhook endpoint ${endpointId} was sealed with another WEBHOOK_SECRETS_KEY (every ` +
          `instance needs the same key)`,
      );
    }
  }
}

export const isSealed = (stored: string): boolean => stored.startsWith(SEALED);

/**
 * WEBHOOK_SECRETS_KEY (32 bytes in base64) or WEBHOOK_SECRETS_KEY_FILE; outside production a key made once in
 * DATA_DIR. In production without one: undefined (webhooks are then not offered).
 */
export async function loadSecretBox(options: {
  dataDir: string;
  production: boolean;
  key?: string;
  keyFile?: string;
}): Promise<SecretBox | undefined> {
  const fromText = (text: string, source: string) => {
    const key = Buffer.from(text.trim(), 'base64');
    if (key.length !== 32)
      throw new Error(
        `${source} must be 32 random bytes in base64 (e.g. openssl rand -base64 32), got ${key.length} bytes`,
      );
    return new SecretBox(key);
  };
  if (options.key) return fromText(options.key, 'WEBHOOK_SECRETS_KEY');
  if (options.keyFile)
    return fromText(await readFile(options.keyFile, 'utf8'), `WEBHOOK_SECRETS_KEY_FILE ${options.keyFile}`);
  if (options.production) return undefined;
  const file = join(options.dataDir, KEY_FILE);
  try {
    await writeFile(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as { code?: string }).code !== 'EEXIST') throw e;
  }
  return fromText(await readFile(file, 'utf8'), file);
}
