/** An audit record as stored: every field the chain covers. */
export interface StoredRecord {
  seq: string;
  id: string;
  kind: string;
  snapshot_hash: string | null;
  subject: string | null;
  record: string;
  record_hash: string;
  prev_chain_hash: string;
  chain_hash: string;
  format: number;
  created_at: Date;
  /** created_at exactly as the chain covers it (UTC, microseconds). */
  created_at_text: string;
}
