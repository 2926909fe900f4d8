import type { SnapshotFiles } from '../pricing/index.js';
import type { StoredRecord } from './audit-log.js';
import type { SignedHead } from './signing.js';

export const BUNDLE_TYPE = 'agent-audio.audit-bundle/1';

/** A record with every stored field the chain covers, created_at as the chain covers it. */
export type BundleRecord = Omit<StoredRecord, 'created_at' | 'created_at_text'> & { created_at: string };

/** One link of the chain: enough to recompute chain_hash from the previous link without the record itself. */
export interface BundleLink {
  seq: string;
  format: number;
  hash: string;
  chain_hash: string;
}

/** Everything an auditor needs to check some records with neither the database nor the network. */
export interface AuditBundle {
  type: typeof BUNDLE_TYPE;
  exported_at: string;
  selection: Record<string, string>;
  records: BundleRecord[];
  /** The catalog and rules each evaluation ran on, by content hash. */
  snapshots: Record<string, SnapshotFiles>;
  /** Every link from the first selected record up to the signed head, in order. */
  chain: { prev_chain_hash: string; links: BundleLink[] };
  signed_head: SignedHead;
  /**
   * Each order's settlement as stored (transaction, block, proof logs when present); also chained in its order_state
   * records.
   */
  settlements: Record<string, unknown>;
  /**
   * The refunds that paid the selected orders back, by id: the refund as stored (a split refund and each of its
   * transfers), with the operator-signed receipt of each one sent. Their evaluations and proofs are among the records.
   */
  refunds?: Record<string, BundleRefund>;
}

/** A refund as the bundle carries it: what it pays back, to whom, the transaction that paid it and its receipt. */
export interface BundleRefund {
  id: string;
  part_of: string | null;
  service_id: string | null;
  /** The order of a refund for an order that was never provisioned. */
  order_id: string | null;
  order_ids: string[];
  reason: string;
  status: string;
  payer: string | null;
  amount_atomic: string | null;
  evaluation_id: string | null;
  transaction: string | null;
  sent_at: string | null;
  /** The receipt the API gives the owner (JWS, EdDSA, the operator key), null until the refund is sent. */
  receipt: { format: 'jws'; signature: string } | null;
}
