import type { RefundEvaluation, RefundInput } from '../pricing/index.js';
import { canonicalJson, sha256 } from './canonical.js';
import { evaluatorVersions } from './versions.js';

/** A refund's evaluation as an auditor reads it: its inputs, the rules' trace and lines, the bound and the amount. */
export interface RefundRecord {
  kind: 'refund_evaluation';
  id: string;
  evaluated_at: string;
  snapshot_hash: string;
  versions: Record<string, string>;
  input: RefundInput;
  facts: Record<string, unknown>;
  trace: RefundEvaluation['trace'];
  lines: RefundEvaluation['lines'];
  total_atomic: string;
  bound_atomic: string;
  minimum_atomic: string;
  /** Who gets what, one transfer per wallet that paid (records from before payers were named have none). */
  transfers?: RefundEvaluation['transfers'];
  amount_atomic: string;
}

export function refundRecord(
  id: string,
  snapshotHash: string,
  input: RefundInput,
  evaluation: RefundEvaluation,
  evaluatedAt: Date,
): { record: RefundRecord; text: string; hash: string } {
  const record: RefundRecord = {
    kind: 'refund_evaluation',
    id,
    evaluated_at: evaluatedAt.toISOString(),
    snapshot_hash: snapshotHash,
    versions: { ...evaluatorVersions },
    input,
    facts: evaluation.facts,
    trace: evaluation.trace,
    lines: evaluation.lines,
    total_atomic: evaluation.total_atomic,
    bound_atomic: evaluation.bound_atomic,
    minimum_atomic: evaluation.minimum_atomic,
    ...(evaluation.transfers && { transfers: evaluation.transfers }),
    amount_atomic: evaluation.amount_atomic,
  };
  const text = canonicalJson(record);
  return { record, text, hash: sha256(text) };
}

/** What a refund evaluation derives from its inputs (compared by a replay). */
export function refundResult(record: RefundRecord): unknown {
  return {
    lines: record.lines,
    total_atomic: record.total_atomic,
    bound_atomic: record.bound_atomic,
    minimum_atomic: record.minimum_atomic,
    ...(record.transfers && { transfers: record.transfers }),
    amount_atomic: record.amount_atomic,
  };
}

/**
 * The proof that a refund was paid: the token's AuthorizationUsed and Transfer logs of its transaction. Chained like
 * a payment's settlement; it names the evaluation that set the amount.
 */
export interface RefundProofRecord {
  kind: 'refund_sent';
  id: string;
  snapshot_hash: null;
  refund_id: string;
  evaluation_id: string;
  service_id: string | null;
  order_ids: string[];
  from: string;
  to: string;
  amount_atomic: string;
  nonce: string;
  proof: Record<string, unknown>;
  sent_at: string;
}

export function refundProofRecord(fields: Omit<RefundProofRecord, 'kind' | 'snapshot_hash'>): {
  record: RefundProofRecord;
  text: string;
  hash: string;
} {
  const record: RefundProofRecord = { kind: 'refund_sent', snapshot_hash: null, ...fields };
  const text = canonicalJson(record);
  return { record, text, hash: sha256(text) };
}
