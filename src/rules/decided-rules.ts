import type { RuleResult } from 'json-rules-engine';
import { EnginePool } from './engine-pool.js';
import { readPath } from './path.js';
import type { RuleSpec } from './types.js';

/** Facts that are the same in every run for one product of one snapshot. */
export const snapshotFacts = ['product', 'settings'];

/**
 * One rule's result as the stage reads it: json-rules-engine's RuleResult, or a decision reused from an earlier run.
 */
export interface RuleOutcome {
  name: string;
  result: boolean;
  /** The evaluated conditions as RuleResult.toJSON gives them (with factResult, valueResult, result). */
  conditions: unknown;
  /** For a rule that fired: its event, with its params' fact references replaced by their values. */
  event?: { type: string; params?: Record<string, unknown> };
}

/**
 * How many distinct key fact values (e.g. billings x packages) one product keeps decisions for; more are decided per
 * run.
 */
const MAX_DECISIONS = 64;

interface Decision {
  rule: RuleSpec;
  result: boolean;
  conditions: unknown;
}

/**
 * Rules whose conditions read only snapshot facts and key facts (facts with a few possible values: the billing, a
 * derived fact's pick among a product's packages):
 * json-rules-engine decides them once per product and key values, and each later run only fills in the facts their
 * events name. json-rules-engine's run costs several µs per rule (it deep-clones every rule's conditions and chains
 * promises per run); the decision cannot differ between runs, as its conditions see the same values.
 */
export class DecidedRules {
  private readonly decisions = new Map<string, Decision[]>();
  private readonly pool: EnginePool;
  private readonly byName: Map<string, RuleSpec>;
  /** Objects in key facts (a catalog item a derived fact picked) are told apart by identity: snapshots never change. */
  private readonly objectIds = new WeakMap<object, number>();
  private lastObjectId = 0;

  constructor(
    private readonly rules: RuleSpec[],
    private readonly keyFacts: string[],
  ) {
    this.pool = new EnginePool(rules);
    this.byName = new Map(rules.map((rule) => [rule.name, rule]));
  }

  /** Whether a rule's conditions read only facts that a DecidedRules with these key facts may decide once. */
  static canDecide(rule: RuleSpec, keyFacts: string[]): boolean {
    return [...factsReadBy(rule.conditions)].every((fact) => snapshotFacts.includes(fact) || keyFacts.includes(fact));
  }

  async outcomes(facts: Record<string, unknown>): Promise<RuleOutcome[]> {
    if (this.rules.length === 0) return [];
    const key = this.decisionKey(facts);
    let decided = key === undefined ? undefined : this.decisions.get(key);
    if (!decided) {
      const run = await this.pool.run(facts);
      decided = [...run.results, ...run.failureResults].map((r) => this.decisionOf(r));
      if (key !== undefined && this.decisions.size < MAX_DECISIONS) this.decisions.set(key, decided);
    }
    return decided.map((d) => ({
      name: d.rule.name,
      result: d.result,
      conditions: d.conditions,
      event: d.result ? resolvedEvent(d.rule.event, facts) : undefined,
    }));
  }

  /** The key facts' values as text: undefined when one holds a number or a function (not worth keeping). */
  private decisionKey(facts: Record<string, unknown>): string | undefined {
    let key = '';
    for (const name of this.keyFacts) {
      const value = factValue(facts, name);
      if (value === undefined) key += 'u;';
      else if (value === null || typeof value === 'string' || typeof value === 'boolean')
        key += `${JSON.stringify(value)};`;
      else if (typeof value === 'object') key += `o${this.objectId(value)};`;
      else return undefined;
    }
    return key;
  }

  private objectId(value: object): number {
    let id = this.objectIds.get(value);
    if (id === undefined) {
      id = ++this.lastObjectId;
      this.objectIds.set(value, id);
    }
    return id;
  }

  private decisionOf(r: RuleResult): Decision {
    const json = r.toJSON(false) as { conditions: unknown };
    // A copy of its own, frozen: it is shared by every later outcome and must not alias the product's objects.
    return {
      rule: this.byName.get(String(r.name))!,
      result: Boolean(r.result),
      conditions: deepFreeze(structuredClone(json.conditions)),
    };
  }
}

/** The facts a condition tree reads: each leaf's fact and the fact a leaf's value refers to. */
export function factsReadBy(node: unknown, into = new Set<string>()): Set<string> {
  const c = node as Record<string, unknown>;
  for (const key of ['all', 'any'] as const)
    if (Array.isArray(c[key])) for (const child of c[key] as unknown[]) factsReadBy(child, into);
  if (c.not) factsReadBy(c.not, into);
  if (typeof c.fact === 'string') into.add(c.fact);
  if (isFactRef(c.value)) into.add(c.value.fact);
  return into;
}

/**
 * The event as json-rules-engine's replaceFactsInEventParams leaves it (Almanac.getValue): a param that is an object
 * with its own "fact" becomes that fact's value, read at its path when the value is an object; other params are copies.
 */
function resolvedEvent(event: RuleSpec['event'], facts: Record<string, unknown>): RuleOutcome['event'] {
  if (event.params === undefined) return { type: event.type };
  const params: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(event.params)) {
    if (isFactRef(value)) {
      const fact = factValue(facts, value.fact);
      params[name] = value.path && fact !== null && typeof fact === 'object' ? readPath(fact, value.path) : fact;
    } else {
      params[name] = value !== null && typeof value === 'object' ? structuredClone(value) : value;
    }
  }
  return { type: event.type, params };
}

function isFactRef(value: unknown): value is { fact: string; path?: string } {
  return value !== null && typeof value === 'object' && Object.prototype.hasOwnProperty.call(value, 'fact');
}

function factValue(facts: Record<string, unknown>, name: string): unknown {
  return Object.prototype.hasOwnProperty.call(facts, name) ? facts[name] : undefined;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
