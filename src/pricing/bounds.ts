import { Decimal, RuleEvaluationError } from '../rules/index.js';
import { evaluatePrice } from './evaluate.js';
import { configurations, thresholds } from './grid.js';
import type { CatalogProduct } from '../catalog/index.js';
import type { Snapshot } from './snapshot-shape.js';

export interface BoundProblem {
  file: string;
  pointer: string;
  message: string;
}

/**
 * Checks that the cheapest and the dearest valid configuration of every quotable product cost within the order limits.
 * Candidates are each parameter's bounds plus every threshold a derived fact compares it with (e.g. package sizes).
 */
export async function checkPriceBounds(snapshot: Snapshot): Promise<BoundProblem[]> {
  const problems: BoundProblem[] = [];
  for (const entry of snapshot.catalog.products) problems.push(...(await productBoundProblems(snapshot, entry)));
  return problems;
}

/** checkPriceBounds for one product: it depends on that product's file, the catalog settings and the rules only. */
export async function productBoundProblems(snapshot: Snapshot, entry: CatalogProduct): Promise<BoundProblem[]> {
  if (snapshot.verdicts.get(entry.product.id)!.rejection || entry.product.billing_type === 'subscription') return [];
  const { minimum, maximum } = snapshot.catalog.settings.order_limits;
  const problem = (pointer: string, message: string) => [{ file: entry.file, pointer, message }];
  let cheapest: { total: Decimal; parameters: Record<string, unknown> } | undefined;
  let dearest: typeof cheapest;
  let broken: string | undefined;
  for (const parameters of configurations(entry, thresholds(snapshot, entry))) {
    const evaluation = await evaluatePrice(snapshot, { product_id: entry.product.id, parameters }).catch((e: Error) => {
      if (!(e instanceof RuleEvaluationError)) throw e;
      broken = e.message;
      return undefined;
    });
    if (!evaluation) break;
    if (evaluation.outcome !== 'priced') continue;
    const total = new Decimal(evaluation.output.amount);
    if (!cheapest || total.lessThan(cheapest.total)) cheapest = { total, parameters };
    if (!dearest || total.greaterThan(dearest.total)) dearest = { total, parameters };
  }
  if (broken) return problem('/pricing', `a price rule cannot price this product: ${broken}`);
  if (!cheapest || !dearest) return problem('/parameters', 'no valid configuration of this product can be priced');
  const problems: BoundProblem[] = [];
  if (cheapest.total.lessThan(minimum)) {
    problems.push(
      ...problem(
        '/pricing',
        `the cheapest configuration ${JSON.stringify(cheapest.parameters)} costs ` +
          `${cheapest.total.toFixed()}, below the order minimum ${minimum}`,
      ),
    );
  }
  if (dearest.total.greaterThan(maximum)) {
    problems.push(
      ...problem(
        '/pricing',
        `the dearest configuration ${JSON.stringify(dearest.parameters)} costs ${dearest.total.toFixed()}, ` +
          `above the order maximum ${maximum}`,
      ),
    );
  }
  return problems;
}
