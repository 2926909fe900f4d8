import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every depth and no whitespace: equal values give equal bytes. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`cannot encode ${typeof value} canonically`);
    return text;
  }
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

export function sha256(text: string): string {
  return `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`;
}

/** Mirrors the SQL function audit_chain_hash. */
export function chainHash(previous: string, recordHash: string): string {
  return sha256(`${previous}\n${recordHash}`);
}

export const GENESIS_CHAIN_HASH = `sha256:${'0'.repeat(64)}`;

/** The fields of a stored record that a format 2 chain link covers (created_at as written by SQL audit_time). */
export interface ChainedFields { seq: string; id: string; kind: string; snapshot_hash: string | null; subject: string | null; record_hash: string; created_at_text: string }

/** Mirrors the SQL function audit_entry_hash. */
export function entryHash(r: ChainedFields): string {
  return sha256(['audit/2', r.seq, r.id, r.kind, r.snapshot_hash ?? '', r.subject ?? '', r.record_hash, r.created_at_text].join('\n'));
}

/** The chain hash a stored record must have after `previous`, by its format. */
export function linkHash(previous: string, r: ChainedFields & { format: number }): string {
  return chainHash(previous, r.format === 1 ? r.record_hash : entryHash(r));
}
