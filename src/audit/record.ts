import type { PriceInput, PriceEvaluation, UpgradeEvaluation, UpgradeInput } from '../pricing/index.js';
import { canonicalJson, canonicalJsonWith, sha256 } from './canonical.js';
import { TextTemplate } from './text-template.js';
import { evaluatorVersions } from './versions.js';

type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;

/** A price evaluation as an auditor reads it: what went in, what the rules saw and decided, what came out. */
export interface PriceRecord {
  kind: 'quote_price' | 'order_price';
  id: string;
  evaluated_at: string;
  snapshot_hash: string;
  versions: Record<string, string>;
  input: PriceInput;
  /** The facts the quote rules saw, except product and settings: those are in the snapshot the record names. */
  facts: Record<string, unknown>;
  /** The quote-stage rule trace, sorted by rule name (the product stage depends on the snapshot alone). */
  trace: Priced['trace']['quote'];
  output: Priced['output'];
  output_hash: string;
}

export function priceRecord(
  id: string,
  snapshotHash: string,
  input: PriceInput,
  evaluation: Priced,
  evaluatedAt: Date,
  kind: PriceRecord['kind'] = 'quote_price',
): { record: PriceRecord; text: string; hash: string } {
  // The output is serialized once: for its own hash and, the same text, inside the record.
  const outputText = canonicalJson(evaluation.output);
  const record = priceRecordFields(id, evaluatedAt.toISOString(), snapshotHash, input, evaluation, kind, outputText);
  const text = canonicalJsonWith(record as unknown as Record<string, unknown>, { output: outputText });
  return { record, text, hash: sha256(text) };
}

/**
 * priceRecord's text and hash for one evaluation, with the record's id and time left open: the rest of the record
 * depends only on the snapshot, the input and the evaluation, so a configuration priced again is not serialized again.
 */
export type PriceRecordText = (id: string, evaluatedAt: Date) => { text: string; hash: string };

export function priceRecordText(
  snapshotHash: string,
  input: PriceInput,
  evaluation: Priced,
  kind: PriceRecord['kind'] = 'quote_price',
): PriceRecordText {
  const outputText = canonicalJson(evaluation.output);
  const text = TextTemplate.reused(['id', 'evaluated_at'], (fields) =>
    canonicalJsonWith(
      priceRecordFields(
        fields.id,
        fields.evaluated_at,
        snapshotHash,
        input,
        evaluation,
        kind,
        outputText,
      ) as unknown as Record<string, unknown>,
      { output: outputText },
    ),
  );
  return (id, evaluatedAt) => {
    const filled = text({ id, evaluated_at: evaluatedAt.toISOString() });
    return { text: filled, hash: sha256(filled) };
  };
}

function priceRecordFields(
  id: string,
  evaluatedAt: string,
  snapshotHash: string,
  input: PriceInput,
  evaluation: Priced,
  kind: PriceRecord['kind'],
  outputText: string,
): PriceRecord {
  return {
    kind,
    id,
    evaluated_at: evaluatedAt,
    snapshot_hash: snapshotHash,
    versions: { ...evaluatorVersions },
    input,
    facts: withoutSnapshotFacts(evaluation.facts),
    trace: evaluation.trace.quote,
    output: evaluation.output,
    output_hash: sha256(outputText),
  };
}

function withoutSnapshotFacts(facts: Record<string, unknown>): Record<string, unknown> {
  const { product, settings, ...rest } = facts;
  return { product_id: (product as { id: string }).id, ...rest };
}

type PricedUpgrade = Extract<UpgradeEvaluation, { outcome: 'priced' }>;

/** One evaluation inside an upgrade record: what went in, the rule trace and what came out. */
export interface EvaluationPart {
  input: PriceInput;
  trace: Priced['trace']['quote'];
  output: Priced['output'];
  output_hash: string;
}

/**
 * An upgrade as an auditor reads it: the inputs fixed when it was priced (remaining hours, what was paid), the
 * target's price, the credit (the current product's evaluation), the minimum and the amount charged.
 */
export interface UpgradeRecord {
  kind: 'upgrade_price';
  id: string;
  evaluated_at: string;
  snapshot_hash: string;
  versions: Record<string, string>;
  input: UpgradeInput;
  target: EvaluationPart;
  current: EvaluationPart | null;
  credit_atomic: string;
  minimum_atomic: string;
  amount_atomic: string;
}

export function upgradeRecord(
  id: string,
  snapshotHash: string,
  input: UpgradeInput,
  evaluation: PricedUpgrade,
  evaluatedAt: Date,
): { record: UpgradeRecord; text: string; hash: string } {
  const part = (priceInput: PriceInput, priced: Priced): EvaluationPart => ({
    input: priceInput,
    trace: priced.trace.quote,
    output: priced.output,
    output_hash: sha256(canonicalJson(priced.output)),
  });
  const record: UpgradeRecord = {
    kind: 'upgrade_price',
    id,
    evaluated_at: evaluatedAt.toISOString(),
    snapshot_hash: snapshotHash,
    versions: { ...evaluatorVersions },
    input,
    target: part(evaluation.targetInput, evaluation.target),
    current: evaluation.current && evaluation.currentInput ? part(evaluation.currentInput, evaluation.current) : null,
    credit_atomic: evaluation.credit_atomic,
    minimum_atomic: evaluation.minimum_atomic,
    amount_atomic: evaluation.amount_atomic,
  };
  const text = canonicalJson(record);
  return { record, text, hash: sha256(text) };
}
