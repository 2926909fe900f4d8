import type { Database } from '../store/index.js';
import type { HeadSigner, SignedCheckpoint, SignedHead } from './signing.js';

/**
 * The latest chain head, signed: signed afresh at most once per `maxAgeMs` (quotes never wait for a signature),
 * and every signed head kept in audit_signed_heads so that a later rewrite before it shows in audit verify.
 */
export class HeadPublisher {
  private cached?: { at: number; signed: Promise<SignedHead>; checkpoint?: Promise<SignedCheckpoint> };

  constructor(
    private readonly db: Database,
    readonly signer: HeadSigner,
    private readonly maxAgeMs = 1000,
  ) {}

  latest(): Promise<SignedHead> {
    if (!this.cached || Date.now() - this.cached.at > this.maxAgeMs) {
      const signed = this.signNow();
      signed.catch(() => {
        this.cached = undefined;
      });
      this.cached = { at: Date.now(), signed };
    }
    return this.cached.signed;
  }

  /** The latest head in its public form, without the record count (GET /audit/head). */
  latestCheckpoint(): Promise<SignedCheckpoint> {
    const signed = this.latest();
    const cached = this.cached!;
    cached.checkpoint ??= signed.then((h) => this.signer.checkpoint(h.head));
    return cached.checkpoint;
  }

  private signNow(): Promise<SignedHead> {
    return signCurrentHead(this.db, this.signer);
  }
}

/** The current chain head signed (or as signed before) and kept in audit_signed_heads. */
export async function signCurrentHead(db: Database, signer: HeadSigner): Promise<SignedHead> {
  const [head] = await db.query<{ seq: string; chain_hash: string }>(
    'SELECT seq::text AS seq, chain_hash FROM audit_head',
  );
  const [kept] = await db.query<{ document: string; signature: string }>(
    'SELECT document, signature FROM audit_signed_heads WHERE seq = $1 AND chain_hash = $2',
    [head.seq, head.chain_hash],
  );
  if (kept) return { head: JSON.parse(kept.document), signature: kept.signature, public_key: signer.publicKeyPem };
  const signed = signer.sign(head.seq, head.chain_hash);
  await db.query(
    'INSERT INTO audit_signed_heads (seq, chain_hash, document, signature) VALUES ($1, $2, $3, $4) ON ' +
      'CONFLICT (seq) DO NOTHING',
    [head.seq, head.chain_hash, JSON.stringify(signed.head), signed.signature],
  );
  return signed;
}
