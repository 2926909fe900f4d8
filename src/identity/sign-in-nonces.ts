import { randomBytes } from 'node:crypto';
import type { Database } from '../store/index.js';

export interface IssuedNonce { nonce: string; issuedAt: Date; expiresAt: Date }

/** Why a nonce was not accepted. */
export type NonceRefusal = 'unknown' | 'expired' | 'used';

const CLEANUP_EVERY_MS = 60_000;

/**
 * SIWX challenge nonces, issued and consumed in PostgreSQL: a nonce is accepted once, for the URI it was issued for,
 * before its expiry, by whichever instance sees it first.
 */
export class SignInNonces {
  private lastCleanup = 0;

  constructor(private readonly db: Database) {}

  async issue(uri: string, lifetimeSeconds: number): Promise<IssuedNonce> {
    const nonce = randomBytes(16).toString('hex');
    const issuedAt = new Date();
    const expiresAt = new Date(issuedAt.getTime() + lifetimeSeconds * 1000);
    await this.db.query('INSERT INTO wallet_sign_in_nonces (nonce, uri, issued_at, expires_at) VALUES ($1, $2, $3, $4)', [nonce, uri, issuedAt, expiresAt]);
    await this.removeOld(issuedAt);
    return { nonce, issuedAt, expiresAt };
  }

  /** Marks the nonce used if it was issued for this URI, is unexpired and unused; otherwise says why not. */
  async consume(nonce: string, uri: string, now = new Date()): Promise<NonceRefusal | undefined> {
    const used = await this.db.query('UPDATE wallet_sign_in_nonces SET used_at = $3 WHERE nonce = $1 AND uri = $2 AND used_at IS NULL AND expires_at > $3 RETURNING nonce', [nonce, uri, now]);
    if (used.length === 1) return undefined;
    const [row] = await this.db.query<{ expires_at: Date; used_at: Date | null } & Record<string, unknown>>(
      'SELECT expires_at, used_at FROM wallet_sign_in_nonces WHERE nonce = $1 AND uri = $2', [nonce, uri]);
    if (!row) return 'unknown';
    return row.used_at ? 'used' : 'expired';
  }

  /** Expired nonces are kept an hour (to answer "used" or "expired" precisely), then removed, at most once a minute. */
  private async removeOld(now: Date): Promise<void> {
    if (now.getTime() - this.lastCleanup < CLEANUP_EVERY_MS) return;
    this.lastCleanup = now.getTime();
    await this.db.query("DELETE FROM wallet_sign_in_nonces WHERE expires_at < $1::timestamptz - interval '1 hour'", [now]);
  }
}
