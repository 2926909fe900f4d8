import { readPath } from './path.js';
import type { RuleSpec } from './types.js';

type Leaf = { fact: string; path?: string; operator: string; value: unknown };

const staticOperators: Record<string, (fact: unknown, value: unknown) => boolean> = {
  equal: (a, b) => a === b,
  notEqual: (a, b) => a !== b,
  in: (a, b) => Array.isArray(b) && b.includes(a),
  notIn: (a, b) => Array.isArray(b) && !b.includes(a),
  contains: (a, b) => Array.isArray(a) && a.includes(b),
  doesNotContain: (a, b) => Array.isArray(a) && !a.includes(b),
};

/**
 * The rules that can fire at all given facts known in advance (the product, the settings): a rule whose top-level
 * "all" has a condition on such a fact that is false can never fire, so it is not run. Fewer rules per run is most of
 * the cost of an evaluation; the trace then lists the rules that could apply to this product.
 */
export function applicableRules(rules: RuleSpec[], known: Record<string, unknown>): RuleSpec[] {
  return rules.filter((rule) => {
    const conditions = rule.conditions as { all?: unknown[]; not?: unknown };
    if (conditions.all) return conditions.all.every((c) => decide(c, known) !== false);
    if (conditions.not) return decide(conditions.not, known) !== true;
    return true;
  });
}

/** true or false when a leaf condition only reads known facts, undefined otherwise. */
function decide(condition: unknown, known: Record<string, unknown>): boolean | undefined {
  const leaf = condition as Partial<Leaf>;
  if (typeof leaf.fact !== 'string' || !(leaf.fact in known)) return undefined;
  const operator = staticOperators[leaf.operator ?? ''];
  return operator ? operator(readPath(known[leaf.fact], leaf.path ?? ''), leaf.value) : undefined;
}
