import type { PriceRecordText } from '../audit/index.js';
import { evaluatePrice, type PriceEvaluation, type PriceInput, type Snapshot } from '../pricing/index.js';

// Enough for the configurations agents ask for again; every entry is kept until the memo is emptied, so a stream of
// distinct configurations must not keep many (their retention showed as garbage-collection time).
const MAX_ENTRIES = 256;

export type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;
export type Refused = Exclude<PriceEvaluation, { outcome: 'priced' }>;

/** What a quote of one input needs from its evaluation, prepared once per snapshot and input. */
export interface PricedInput<Document> {
  priced: Priced;
  record: PriceRecordText;
  document: Document;
}

/**
 * Evaluations of the inputs quoted on the served snapshot, with what is derived from them alone (the record's text
 * but for its id and time, the quote document's text; see TextTemplate.reused). An evaluation is a function of the
 * snapshot and the input (an auditor's replay depends on it), so a configuration quoted again is not evaluated again:
 * the next snapshot empties the memo, as does a full one. Refusals are not kept; each is evaluated again.
 */
export class PricedInputs<Document> {
  private snapshot?: Snapshot;
  private readonly entries = new Map<string, Promise<Refused | PricedInput<Document>>>();

  constructor(
    private readonly prepare: (snapshot: Snapshot, input: PriceInput, priced: Priced) => PricedInput<Document>,
  ) {}

  /** The evaluation of `input` (whose canonical JSON is `inputText`): prepared when priced, else the refusal. */
  of(snapshot: Snapshot, input: PriceInput, inputText: string): Promise<Refused | PricedInput<Document>> {
    if (snapshot !== this.snapshot || this.entries.size >= MAX_ENTRIES) {
      this.entries.clear();
      this.snapshot = snapshot;
    }
    const kept = this.entries.get(inputText);
    if (kept) return kept;
    const entry = evaluatePrice(snapshot, input).then((evaluation) => {
      if (evaluation.outcome !== 'priced') {
        if (this.entries.get(inputText) === entry) this.entries.delete(inputText);
        return evaluation;
      }
      return this.prepare(snapshot, input, evaluation);
    });
    entry.catch(() => {
      if (this.entries.get(inputText) === entry) this.entries.delete(inputText);
    });
    this.entries.set(inputText, entry);
    return entry;
  }
}
