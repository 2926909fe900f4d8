import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../errors/index.js';
import type { Database } from '../store/index.js';

export interface ApiKey { id: string; name: string; created_at: Date; revoked_at: Date | null }

const TOKEN = /^aak_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** Agent API keys: "aak_<id>_<secret>". Only a hash of the secret is stored; the token is shown once. */
export class ApiKeys {
  constructor(private readonly db: Database) {}

  async create(name: string): Promise<{ key: ApiKey; token: string }> {
    const id = randomBytes(8).toString('hex');
    const secret = randomBytes(32).toString('base64url');
    const [row] = await this.db.query<ApiKey & Record<string, unknown>>(
      'INSERT INTO api_keys (id, name, secret_hash) VALUES ($1, $2, $3) RETURNING id, name, created_at, revoked_at', [id, name, hashSecret(secret)]);
    return { key: row, token: `aak_${id}_${secret}` };
  }

  list(): Promise<ApiKey[]> {
    return this.db.query<ApiKey & Record<string, unknown>>('SELECT id, name, created_at, revoked_at FROM api_keys ORDER BY created_at, id');
  }

  async revoke(id: string): Promise<boolean> {
    const rows = await this.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id', [id]);
    return rows.length === 1;
  }

  /** The key a valid, unrevoked token belongs to, or undefined. Compared in constant time. */
  async verify(token: string): Promise<ApiKey | undefined> {
    const match = TOKEN.exec(token);
    if (!match) return undefined;
    const [row] = await this.db.query<ApiKey & { secret_hash: Buffer } & Record<string, unknown>>(
      'SELECT id, name, created_at, revoked_at, secret_hash FROM api_keys WHERE id = $1', [match[1]]);
    if (!row || !timingSafeEqual(row.secret_hash, hashSecret(match[2])) || row.revoked_at) return undefined;
    return { id: row.id, name: row.name, created_at: row.created_at, revoked_at: row.revoked_at };
  }

  /** Resolves the Authorization header to a key, or throws the 401 error document. */
  async authenticate(authorization: string | undefined): Promise<ApiKey> {
    const bearer = /^Bearer +(\S+)\s*$/i.exec(authorization ?? '');
    const key = bearer ? await this.verify(bearer[1]) : undefined;
    if (key) return key;
    throw new ApiError(401, authorization ? 'invalid_api_key' : 'authentication_required',
      authorization
        ? 'The API key is not valid or was revoked. Send a valid agent API key as "Authorization: Bearer <key>"; ask the operator for a new key if yours was revoked.'
        : 'This operation needs an agent API key: send it as "Authorization: Bearer <key>".',
      { headers: { 'WWW-Authenticate': 'Bearer realm="agent-audio-api"' } });
  }
}
