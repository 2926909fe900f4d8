import { toDecimal } from './decimal.js';
import { compareDecimal } from './operators.js';
import { readPath } from './path.js';
import type { DerivedFactSpec } from './types.js';

/**
 * Picks one item of a catalog list (e.g. the smallest covering package), as declared in a rules file. Null when none
 * fits.
 */
export function deriveFact(spec: DerivedFactSpec, facts: Record<string, unknown>): unknown {
  const list = readPath(facts, spec.from);
  if (!Array.isArray(list)) return null;
  const params = (facts.params ?? {}) as Record<string, unknown>;
  const matching = list.filter((item) =>
    (spec.where ?? []).every((w) => compareDecimal(w.operator, readPath(item, w.field), params[w.param])),
  );
  if (matching.length === 0) return null;
  const sorted = [...matching].sort((a, b) => {
    const x = toDecimal(readPath(a, spec.order_by));
    const y = toDecimal(readPath(b, spec.order_by));
    if (!x || !y) return 0;
    return x.comparedTo(y);
  });
  return spec.pick === 'first' ? sorted[0] : sorted[sorted.length - 1];
}
