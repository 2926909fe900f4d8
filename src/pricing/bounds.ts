import type { CatalogProduct } from '../catalog/index.js';
import { Decimal, readPath as readPathOf, RuleEvaluationError } from '../rules/index.js';
import { evaluatePrice } from './evaluate.js';
import type { Snapshot } from './snapshot.js';

export interface BoundProblem { file: string; pointer: string; message: string }

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
    if (broken) {
      problems.push({ file: entry.file, pointer: '/pricing', message: `a price rule cannot price this product: ${broken}` });
      continue;
    }
    if (!cheapest || !dearest) {
      problems.push({ file: entry.file, pointer: '/parameters', message: 'no valid configuration of this product can be priced' });
      continue;
    }
    if (cheapest.total.lessThan(minimum)) {
      problems.push({ file: entry.file, pointer: '/pricing', message: `the cheapest configuration ${JSON.stringify(cheapest.parameters)} costs ${cheapest.total.toFixed()}, below the order minimum ${minimum}` });
    }
    if (dearest.total.greaterThan(maximum)) {
      problems.push({ file: entry.file, pointer: '/pricing', message: `the dearest configuration ${JSON.stringify(dearest.parameters)} costs ${dearest.total.toFixed()}, above the order maximum ${maximum}` });
    }
  }
  return problems;
}

function thresholds(snapshot: Snapshot, entry: CatalogProduct): Map<string, unknown[]> {
  const found = new Map<string, unknown[]>();
  for (const spec of snapshot.rules.quote.derivedFacts) {
    const [root, ...rest] = spec.from.split('.');
    if (root !== 'product') continue;
    const list = readPathOf(entry.product, rest.join('.'));
    if (!Array.isArray(list)) continue;
    for (const w of spec.where ?? []) {
      found.set(w.param, [...(found.get(w.param) ?? []), ...list.map((item) => readPathOf(item, w.field))]);
    }
  }
  return found;
}

function* configurations(entry: CatalogProduct, extra: Map<string, unknown[]>): Generator<Record<string, unknown>> {
  const choices = Object.entries(entry.acceptedParameters).map(([name, d]) => {
    let values: unknown[];
    if (d.type === 'boolean') values = [false, true];
    else if (d.type === 'number' || d.type === 'integer' || d.type === 'quantity') {
      values = [d.minimum ?? d.default ?? 0, d.maximum ?? d.minimum ?? d.default ?? 0, ...(extra.get(name) ?? [])]
        .filter((v) => (d.minimum === undefined || Number(v) >= d.minimum) && (d.maximum === undefined || Number(v) <= d.maximum));
    } else values = [d.default ?? (d.type === 'url' ? 'https://example.com/stream' : 'x')];
    return [name, [...new Set(values)]] as const;
  });
  const combine = function* (i: number, acc: Record<string, unknown>): Generator<Record<string, unknown>> {
    if (i === choices.length) { yield { ...acc }; return; }
    const [name, values] = choices[i];
    for (const v of values) yield* combine(i + 1, { ...acc, [name]: v });
  };
  yield* combine(0, {});
}
