import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../errors/index.js';
import { ChannelListener, type Client, type Database } from '../store/index.js';

/** Notified by a trigger when an API key is revoked (migration 017), with the key's id. */
const REVOCATION_CHANNEL = 'api_key_revoked';

export interface ApiKey {
  id: string;
  name: string;
  created_at: Date;
  revoked_at: Date | null;
  /** When the key stops being accepted; null: never. */
  expires_at?: Date | null;
}

/**
 * A self-service key's owner: the wallet it was issued to (lower-case 0x address) and the client address that asked.
 */
export interface KeyWallet {
  address: string;
  ip: string;
  /** When the key expires (keys made over MCP); none: it lasts until revoked. */
  expiresAt?: Date;
}

const TOKEN = /^aak_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

function hashSecret(secret: string): Buffer {
  return createHash('sha256').update(secret).digest();
}

/** Agent API keys: "aak_<id>_<secret>". Only a hash of the secret is stored; the token is shown once. */
export class ApiKeys {
  /** Tokens this process has verified, for operations whose write checks revocation itself. */
  private readonly verified = new Map<string, ApiKey>();
  /** Tokens verified while revocations are pushed to this process (listenForRevocations): used by every operation. */
  private readonly cached = new Map<string, ApiKey>();
  private revocations?: ChannelListener;
  /** Bumped by every revocation and lost listener: a lookup that started before one must not fill the cache. */
  private generation = 0;

  constructor(private readonly db: Database) {}

  /**
   * Keeps verified keys in memory and drops them when PostgreSQL notifies a revocation (from any instance or by hand);
   * while that notification channel is down nothing is cached. Returns the function that stops listening.
   */
  async listenForRevocations(): Promise<() => Promise<void>> {
    this.revocations = new ChannelListener(this.db, REVOCATION_CHANNEL, {
      onNotified: (id) => this.forget(id),
      onLost: () => this.forgetAll(),
    });
    await this.revocations.start();
    return () => this.revocations!.stop();
  }

  private forget(keyId: string): void {
    this.generation++;
    for (const map of [this.cached, this.verified]) {
      for (const [token, key] of map) if (key.id === keyId) map.delete(token);
    }
  }

  private forgetAll(): void {
    this.generation++;
    this.cached.clear();
  }

  /** A new key (bound to a wallet for self-service keys, inside the caller's transaction when `client` is given). */
  async create(name: string, wallet?: KeyWallet, client?: Client): Promise<{ key: ApiKey; token: string }> {
    const id = randomBytes(8).toString('hex');
    const secret = randomBytes(32).toString('base64url');
    const sql =
      'INSERT INTO api_keys (id, name, secret_hash, wallet_address, created_from_ip, expires_at) VALUES ($1, ' +
      '$2, $3, $4, $5, $6) RETURNING id, name, created_at, revoked_at, expires_at';
    const params = [
      id,
      name,
      hashSecret(secret),
      wallet?.address ?? null,
      wallet?.ip ?? null,
      wallet?.expiresAt ?? null,
    ];
    const [row] = client
      ? ((await client.query(sql, params)).rows as ApiKey[])
      : await this.db.query<ApiKey & Record<string, unknown>>(sql, params);
    return { key: row, token: `aak_${id}_${secret}` };
  }

  /** The keys issued to this wallet, revoked ones too (never their secrets). */
  listForWallet(address: string): Promise<ApiKey[]> {
    return this.db.query<ApiKey & Record<string, unknown>>(
      'SELECT id, name, created_at, revoked_at, expires_at FROM api_keys WHERE wallet_address = $1 ORDER BY ' +
        'created_at, id',
      [address],
    );
  }

  /** Revokes one of this wallet's keys; false when it has no such live key. */
  async revokeForWallet(address: string, id: string): Promise<boolean> {
    const rows = await this.db.query(
      'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND wallet_address = $2 AND revoked_at IS NULL ' +
        'RETURNING id',
      [id, address],
    );
    return rows.length === 1;
  }

  list(): Promise<ApiKey[]> {
    return this.db.query<ApiKey & Record<string, unknown>>(
      'SELECT id, name, created_at, revoked_at FROM api_keys ORDER BY created_at, id',
    );
  }

  async revoke(id: string): Promise<boolean> {
    const rows = await this.db.query(
      'UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id',
      [id],
    );
    return rows.length === 1;
  }

  /** The key a valid, unrevoked token belongs to, or undefined. Compared in constant time. */
  async verify(token: string): Promise<ApiKey | undefined> {
    const match = TOKEN.exec(token);
    if (!match) return undefined;
    const [row] = await this.db.query<ApiKey & { secret_hash: Buffer } & Record<string, unknown>>(
      'SELECT id, name, created_at, revoked_at, expires_at, secret_hash FROM api_keys WHERE id = $1',
      [match[1]],
    );
    if (!row || !timingSafeEqual(row.secret_hash, hashSecret(match[2])) || row.revoked_at || expired(row))
      return undefined;
    return {
      id: row.id,
      name: row.name,
      created_at: row.created_at,
      revoked_at: row.revoked_at,
      expires_at: row.expires_at,
    };
  }

  /** Resolves the Authorization header to a key, or throws the 401 error document. */
  async authenticate(authorization: string | undefined): Promise<ApiKey> {
    const token = bearerToken(authorization);
    const cachable = this.revocations?.listening === true;
    const known = cachable && token ? this.cached.get(token) : undefined;
    if (known && !expired(known)) return known;
    const generation = this.generation;
    const key = token ? await this.verify(token) : undefined;
    if (key) {
      this.remember(token!, key);
      if (cachable && this.revocations!.listening && generation === this.generation) {
        if (this.cached.size >= 10_000) this.cached.clear();
        this.cached.set(token!, key);
      }
      return key;
    }
    throw unauthorized(authorization);
  }

  /**
   * Like authenticate, but a token this process already verified is not looked up again. Only for operations whose
   * database write refuses a revoked key in the same statement (quotes, order claims), so revocation still acts at
   * once.
   */
  async authenticateForWrite(authorization: string | undefined): Promise<ApiKey> {
    const token = bearerToken(authorization);
    const known = token ? this.verified.get(token) : undefined;
    return known && !expired(known) ? known : this.authenticate(authorization);
  }

  /** The write found the key revoked: forget it and answer 401. */
  revokedDuringRequest(authorization: string | undefined): ApiError {
    const token = bearerToken(authorization);
    if (token) {
      this.verified.delete(token);
      this.cached.delete(token);
    }
    return unauthorized(authorization);
  }

  private remember(token: string, key: ApiKey): void {
    if (this.verified.size >= 10_000) this.verified.clear();
    this.verified.set(token, key);
  }
}

function expired(key: Pick<ApiKey, 'expires_at'>): boolean {
  return key.expires_at != null && key.expires_at.getTime() <= Date.now();
}

/** Thrown by a write that found the caller's key revoked since it was checked. */
export class KeyRevoked extends Error {}

function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer +(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

function unauthorized(authorization: string | undefined): ApiError {
  return new ApiError(
    401,
    authorization ? 'invalid_api_key' : 'authentication_required',
    authorization
      ? 'The API key is not valid, expired or was revoked. Send a valid agent API key as "Authorization: ' +
          'Bearer <key>"; ask the operator for a new key if yours was revoked.'
      : 'This operation needs an agent API key: send it as "Authorization: Bearer <key>".',
    { bearerChallenge: true },
  );
}
