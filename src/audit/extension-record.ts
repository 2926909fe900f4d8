import type { ExtensionEvaluation, ExtensionInput, PriceEvaluation, PriceInput } from '../pricing/index.js';
import { canonicalJson, sha256 } from './canonical.js';
import type { EvaluationPart } from './record.js';
import { evaluatorVersions } from './versions.js';

type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;
type PricedExtension = Extract<ExtensionEvaluation, { outcome: 'priced' }>;

/**
 * An extension as an auditor reads it: the inputs fixed when it was priced (the service's limits, the hours paid
 * and asked for), the product's price for the new total and for the paid hours, the bounds and the amount charged.
 */
export interface ExtensionRecord {
  kind: 'extension_price';
  id: string;
  evaluated_at: string;
  snapshot_hash: string;
  versions: Record<string, string>;
  input: ExtensionInput;
  total: EvaluationPart;
  paid: EvaluationPart;
  minimum_atomic: string;
  maximum_atomic: string;
  amount_atomic: string;
}

export function extensionRecord(
  id: string,
  snapshotHash: string,
  input: ExtensionInput,
  evaluation: PricedExtension,
  evaluatedAt: Date,
): { record: ExtensionRecord; text: string; hash: string } {
  const part = (priceInput: PriceInput, priced: Priced): EvaluationPart => ({
    input: priceInput,
    trace: priced.trace.quote,
    output: priced.output,
    output_hash: sha256(canonicalJson(priced.output)),
  });
  const record: ExtensionRecord = {
    kind: 'extension_price',
    id,
    evaluated_at: evaluatedAt.toISOString(),
    snapshot_hash: snapshotHash,
    versions: { ...evaluatorVersions },
    input,
    total: part(evaluation.totalInput, evaluation.total),
    paid: part(evaluation.paidInput, evaluation.paid),
    minimum_atomic: evaluation.minimum_atomic,
    maximum_atomic: evaluation.maximum_atomic,
    amount_atomic: evaluation.amount_atomic,
  };
  const text = canonicalJson(record);
  return { record, text, hash: sha256(text) };
}

/** What an extension record derives from its inputs. */
export function extensionResult(record: ExtensionRecord): unknown {
  return {
    total: record.total,
    paid: record.paid,
    minimum_atomic: record.minimum_atomic,
    maximum_atomic: record.maximum_atomic,
    amount_atomic: record.amount_atomic,
  };
}
