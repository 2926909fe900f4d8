import type { Product } from '../catalog/index.js';
import {
  atomicToAmount,
  type NotOrderableReason,
  type PriceLine,
  type Rejection,
  type TraceEntry,
} from '../rules/index.js';
import { schemaProblems, type SchemaProblem } from '../schema/ajv.js';
import { decimalsOf, type Snapshot } from './snapshot-shape.js';

export interface PriceInput {
  product_id: string;
  parameters: Record<string, unknown>;
  /** How the order is billed; quotes leave it out (billing "quote"). */
  billing?: 'one_time' | 'quote' | 'monthly' | 'annual';
}

/** Everything that depends only on the input and the snapshot: what an auditor replays byte for byte. */
export interface PriceOutput {
  product_id: string;
  configuration: Record<string, unknown>;
  lines: PriceLine[];
  total_atomic: string;
  amount: string;
  currency: string;
  decimals: number;
  agent_orderable: boolean;
  not_orderable_reasons: NotOrderableReason[];
}

export type PriceEvaluation =
  | { outcome: 'unknown_product' }
  | { outcome: 'rejected'; rejection: Rejection; problems?: SchemaProblem[] }
  | {
      outcome: 'priced';
      product: Product;
      output: PriceOutput;
      facts: Record<string, unknown>;
      trace: { product: TraceEntry[]; quote: TraceEntry[] };
    };

export async function evaluatePrice(snapshot: Snapshot, input: PriceInput): Promise<PriceEvaluation> {
  const entry = snapshot.catalog.byId.get(input.product_id);
  if (!entry) return { outcome: 'unknown_product' };
  const verdict = snapshot.verdicts.get(input.product_id)!;
  if (verdict.rejection) return { outcome: 'rejected', rejection: verdict.rejection };

  const params = structuredClone(input.parameters ?? {});
  const validate = snapshot.validators.get(input.product_id)!;
  if (!validate(params)) {
    const problems = schemaProblems(validate.errors).map((p) => ({ ...p, pointer: `/parameters${p.pointer}` }));
    return {
      outcome: 'rejected',
      problems,
      rejection: {
        status: 422,
        code: 'invalid_parameters',
        message:
          `The parameters of ${input.product_id} are not valid: ` +
          `${problems.map((p) => `${p.pointer} ${p.message}`).join('; ')}. Fix them as listed in error.details and send the request again; GET /products/${input.product_id} describes every parameter.`,
      },
    };
  }
  const configuration: Record<string, unknown> = {};
  for (const name of Object.keys(entry.acceptedParameters)) if (name in params) configuration[name] = params[name];

  const product = entry.product;
  const facts = {
    product,
    settings: snapshot.catalog.settings,
    params: configuration,
    billing: input.billing ?? 'quote',
  };
  const outcome = await snapshot.rules.quote.evaluate(facts, decimalsOf(entry));
  if (outcome.rejections.length) return { outcome: 'rejected', rejection: outcome.rejections[0] };

  return {
    outcome: 'priced',
    product,
    facts: outcome.facts,
    trace: { product: verdict.outcome.trace, quote: outcome.trace },
    output: {
      product_id: product.id,
      configuration,
      lines: outcome.lines,
      total_atomic: outcome.total_atomic!,
      amount: atomicToAmount(outcome.total_atomic!, decimalsOf(entry)),
      currency: String(product.pricing.currency),
      decimals: decimalsOf(entry),
      agent_orderable: verdict.notOrderable.length === 0,
      not_orderable_reasons: verdict.notOrderable,
    },
  };
}
