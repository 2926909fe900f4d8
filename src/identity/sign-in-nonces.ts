import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Database } from '../store/index.js';

export interface IssuedNonce {
  nonce: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** What a request asks for: the method (HEAD counts as GET) and the resource's public URL (no query). */
export interface SignInTarget {
  method: string;
  uri: string;
}

/** Why a nonce was not accepted; `other_method` names the method it was issued for. */
export type NonceRefusal =
  | { kind: 'unknown' }
  | { kind: 'expired' }
  | { kind: 'used' }
  | { kind: 'other_method'; method: string };

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const CLEANUP_EVERY_MS = 60_000;
const NONCE = /^[0-9a-f]{32}$/;

/**
 * SIWX challenge nonces that cost nothing to issue: 32 hex characters (as the x402 extension's nonces) holding the
 * expiry (4 bytes), 4 random bytes and 8 bytes of an HMAC over them, the method and the resource's URI, keyed by a
 * secret kept in PostgreSQL (the same for every instance). Only a nonce that a correctly signed message redeems is
 * stored, until it expires, so that it is accepted once by whichever instance sees it first.
 */
export class SignInNonces {
  private secret?: Promise<Buffer>;
  private lastCleanup = 0;

  constructor(private readonly db: Database) {}

  async issue(target: SignInTarget, lifetimeSeconds: number): Promise<IssuedNonce> {
    const issuedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    const expiry = issuedAt.getTime() / 1000 + lifetimeSeconds;
    const head = Buffer.alloc(8);
    head.writeUInt32BE(expiry, 0);
    randomBytes(4).copy(head, 4);
    const mac = await this.mac(head, methodOf(target.method), target.uri);
    return { nonce: Buffer.concat([head, mac]).toString('hex'), issuedAt, expiresAt: new Date(expiry * 1000) };
  }

  /**
   * Whether this nonce is one this service issued for this method and URI, unexpired and not yet redeemed: answered
   * from the nonce itself and one indexed read, before any signature is looked at.
   */
  async check(
    nonce: string,
    target: SignInTarget,
    now = Date.now(),
  ): Promise<{ expiresAt: Date } | { refusal: NonceRefusal }> {
    if (typeof nonce !== 'string' || !NONCE.test(nonce)) return { refusal: { kind: 'unknown' } };
    const bytes = Buffer.from(nonce, 'hex');
    const head = bytes.subarray(0, 8);
    const sent = bytes.subarray(8);
    const method = methodOf(target.method);
    if (!(await this.signs(sent, head, method, target.uri))) {
      for (const other of METHODS) {
        if (other !== method && (await this.signs(sent, head, other, target.uri)))
          return { refusal: { kind: 'other_method', method: other } };
      }
      return { refusal: { kind: 'unknown' } };
    }
    const expiresAt = new Date(head.readUInt32BE(0) * 1000);
    if (expiresAt.getTime() <= now) return { refusal: { kind: 'expired' } };
    const [used] = await this.db.query('SELECT 1 FROM wallet_sign_in_redeemed WHERE nonce = $1', [nonce]);
    return used ? { refusal: { kind: 'used' } } : { expiresAt };
  }

  /** Records the nonce as used; false when another request redeemed it first. */
  async redeem(nonce: string, expiresAt: Date): Promise<boolean> {
    const rows = await this.db.query(
      'INSERT INTO wallet_sign_in_redeemed (nonce, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING nonce',
      [nonce, expiresAt],
    );
    await this.removeExpired();
    return rows.length === 1;
  }

  private async signs(sent: Buffer, head: Buffer, method: string, uri: string): Promise<boolean> {
    return timingSafeEqual(sent, await this.mac(head, method, uri));
  }

  private async mac(head: Buffer, method: string, uri: string): Promise<Buffer> {
    return createHmac('sha256', await this.key())
      .update(head)
      .update(`\n${method}\n${uri}`)
      .digest()
      .subarray(0, 8);
  }

  /** The secret, created once by the first instance that needs it. */
  private key(): Promise<Buffer> {
    this.secret ??= (async () => {
      await this.db.query('INSERT INTO wallet_sign_in_secret (id, secret) VALUES (1, $1) ON CONFLICT DO NOTHING', [
        randomBytes(32),
      ]);
      const [row] = await this.db.query<{ secret: Buffer } & Record<string, unknown>>(
        'SELECT secret FROM wallet_sign_in_secret WHERE id = 1',
      );
      return row.secret;
    })();
    this.secret.catch(() => {
      this.secret = undefined;
    });
    return this.secret;
  }

  /** Redeemed nonces are kept until they expire (a replay after that is refused as expired), removed once a minute. */
  private async removeExpired(): Promise<void> {
    const now = Date.now();
    if (now - this.lastCleanup < CLEANUP_EVERY_MS) return;
    this.lastCleanup = now;
    await this.db.query('DELETE FROM wallet_sign_in_redeemed WHERE expires_at < now()');
  }
}

function methodOf(method: string): string {
  const upper = method.toUpperCase();
  return upper === 'HEAD' ? 'GET' : upper;
}
