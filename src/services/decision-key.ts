import { compareDecimal, decimalOperators, readPath, type Stage } from '../rules/index.js';

/** A condition that compares a usage figure as a decimal with a literal or another figure. */
interface Comparison {
  operator: string;
  left: string;
  right: { literal: unknown } | { usage: string };
}

/** What a stage's conditions and derived facts read of the usage, worked out once per stage. */
interface UsageReads {
  text: string;
  whole: boolean;
  comparisons: Comparison[];
  /** Figures read only by those comparisons: their outcomes stand for them. */
  comparedOnly: Set<string>;
  named: Map<string, boolean>;
}

const DECIMAL_OPERATORS = new Set(decimalOperators);
const readsByStage = new WeakMap<Stage, UsageReads>();

/**
 * The usage as far as it decides which of a stage's rules fire: the figures whose name appears in its conditions or
 * derived facts (a name inside a longer one counts too, so a figure is left out only when no condition can read it).
 * A figure read only in decimal comparisons is given as the outcomes of those comparisons: a transfer used that grows
 * every pass changes the key only when it passes what was bought.
 */
export function usageDecidingRules(stage: Stage, usage: Record<string, unknown>): Record<string, unknown> {
  const reads = usageReadsOf(stage);
  if (reads.whole) return usage;
  const read: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(usage)) {
    let named = reads.named.get(name);
    if (named === undefined) reads.named.set(name, (named = reads.text.includes(name)));
    if (named && !reads.comparedOnly.has(name)) read[name] = value;
  }
  if (reads.comparisons.length) read['(comparisons)'] = reads.comparisons.map((c) => outcome(c, usage));
  return read;
}

function outcome(comparison: Comparison, usage: Record<string, unknown>): boolean {
  const { right } = comparison;
  const value = 'usage' in right ? readPath(usage, right.usage) : right.literal;
  return compareDecimal(comparison.operator, readPath(usage, comparison.left), value);
}

function usageReadsOf(stage: Stage): UsageReads {
  let reads = readsByStage.get(stage);
  if (reads) return reads;
  const conditions = stage.rules.map((rule) => rule.conditions);
  const text = JSON.stringify([conditions, stage.derivedFacts]);
  const comparisons: Comparison[] = [];
  collectComparisons(conditions, comparisons);
  const comparedOnly = figuresComparedOnly(text, comparisons);
  reads = {
    text,
    whole: readsWhole(conditions) || readsWhole(stage.derivedFacts),
    comparisons: comparisons.filter((c) => namesOf(c).every((name) => comparedOnly.has(name))),
    comparedOnly,
    named: new Map(),
  };
  readsByStage.set(stage, reads);
  return reads;
}

/**
 * The figures every mention of which (in the stage's text) is in these comparisons, and whose comparisons compare
 * only such figures: the outcomes of those comparisons then decide all that the figures decide.
 */
function figuresComparedOnly(text: string, comparisons: Comparison[]): Set<string> {
  const mentions = new Map<string, number>();
  for (const name of comparisons.flatMap(namesOf)) mentions.set(name, (mentions.get(name) ?? 0) + 1);
  // A figure named anywhere else (a derived fact, another operator, inside a longer name) keeps its value in the key.
  const only = new Set(
    [...mentions].filter(([name, count]) => occurrences(text, name) === count).map(([name]) => name),
  );
  for (let changed = true; changed; ) {
    changed = false;
    for (const names of comparisons.map(namesOf)) {
      if (names.every((name) => only.has(name))) continue;
      for (const name of names) changed = only.delete(name) || changed;
    }
  }
  return only;
}

const namesOf = (c: Comparison) => ('usage' in c.right ? [c.left, c.right.usage] : [c.left]);

/** Every condition in a tree (all, any, not) that compares a top-level usage figure as a decimal. */
function collectComparisons(node: unknown, into: Comparison[]): void {
  if (Array.isArray(node)) return node.forEach((child) => collectComparisons(child, into));
  if (typeof node !== 'object' || node === null) return;
  const o = node as Record<string, unknown>;
  const comparison = comparisonOf(o);
  if (comparison) into.push(comparison);
  else for (const child of Object.values(o)) collectComparisons(child, into);
}

function comparisonOf(o: Record<string, unknown>): Comparison | undefined {
  if (o.fact !== 'usage' || !isName(o.path) || !DECIMAL_OPERATORS.has(String(o.operator))) return undefined;
  const value = o.value;
  if (typeof value !== 'object' || value === null)
    return { operator: String(o.operator), left: o.path, right: { literal: value } };
  const ref = value as Record<string, unknown>;
  const plainReference = ref.fact === 'usage' && isName(ref.path) && Object.keys(ref).length === 2;
  return plainReference
    ? { operator: String(o.operator), left: o.path, right: { usage: ref.path as string } }
    : undefined;
}

const isName = (path: unknown): path is string => typeof path === 'string' && /^[a-z_][a-z0-9_]*$/i.test(path);

const occurrences = (text: string, name: string) => text.split(name).length - 1;

/** Whether a condition reads the usage fact as a whole (no path into it). */
function readsWhole(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const o = value as Record<string, unknown>;
  if ((o.fact === 'usage' && o.path === undefined) || o.from === 'usage') return true;
  return Object.values(o).some(readsWhole);
}
