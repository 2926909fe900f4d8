import { Decimal, RuleEvaluationError } from '../rules/index.js';
import { evaluatePrice } from './evaluate.js';
import { configurations, thresholds } from './grid.js';
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
  const { minimum, maximum } = snapshot.catalog.settings.order_limits;
  const problems: BoundProblem[] = [];
  for (const entry of snapshot.catalog.products) {
    if (snapshot.verdicts.get(entry.product.id)!.rejection || entry.product.billing_type === 'subscription') continue;
    let cheapest: { total: Decimal; parameters: Record<string, unknown> } | undefined;
    let dearest: typeof cheapest;
    let broken: string | undefined;
    for (const parameters of configurations(entry, thresholds(snapshot, entry))) {
      const evaluation = await evaluatePrice(snapshot, { product_id: entry.product.id, parameters }).catch(
        (e: Error) => {
          if (!(e instanceof RuleEvaluationError)) throw e;
          broken = e.message;
          return undefined;
        },
      );
      if (!evaluation) break;
      if (evaluation.outcome !== 'priced') continue;
      const total = new Decimal(evaluation.output.amount);
      if (!cheapest || total.lessThan(cheapest.total)) cheapest = { total, parameters };
      if (!dearest || total.greaterThan(dearest.total)) dearest = { total, parameters };
    }
    if (broken) {
      problems.push({
        file: entry.file,
        pointer: '/pricing',
        message: `a price rule cannot price this product: ${broken}`,
      });
      continue;
    }
    if (!cheapest || !dearest) {
      problems.push({
        file: entry.file,
        pointer: '/parameters',
        message: 'no valid configuration of this product can be priced',
      });
      continue;
    }
    if (cheapest.total.lessThan(minimum)) {
      problems.push({
        file: entry.file,
        pointer: '/pricing',
        message: `the cheapest configuration ${JSON.stringify(cheapest.parameters)} costs ${cheapest.total.toFixed()}, below the order minimum ${minimum}`,
      });
    }
    if (dearest.total.greaterThan(maximum)) {
      problems.push({
        file: entry.file,
        pointer: '/pricing',
        message: `the dearest configuration ${JSON.stringify(dearest.parameters)} costs ${dearest.total.toFixed()}, above the order maximum ${maximum}`,
      });
    }
  }
  return problems;
}
