import type { RuleResult } from 'json-rules-engine';
import { DecidedRules, type RuleOutcome } from './decided-rules.js';
import { Decimal, atomicToAmount, plain, scale, toDecimal } from './decimal.js';
import { deriveFact } from './derived-facts.js';
import { applicableRules } from './applicable-rules.js';
import { EnginePool } from './engine-pool.js';
import { readPath } from './path.js';
import type {
  DerivedFactSpec,
  NotOrderableReason,
  PriceLine,
  Rejection,
  RuleSpec,
  ServiceAction,
  ServiceDecision,
  StageOutcome,
  TraceEntry,
} from './types.js';

export class RuleEvaluationError extends Error {}

/** The rules that can apply to one product (see applicableRules), split by who decides them per run. */
interface ProductRules {
  product: unknown;
  settings: unknown;
  decided: DecidedRules;
  /**
   * Rules whose conditions read other per-run facts (parameters, holdings, usage): json-rules-engine runs them every
   * time.
   */
  pool?: EnginePool;
}

export interface StageOptions {
  /**
   * Facts with a few possible values besides the snapshot's (billing, derived facts): rules reading only these are
   * decided once per product and values (see DecidedRules). decideOnce false runs every rule in every run.
   */
  keyFacts?: string[];
  decideOnce?: boolean;
}

/** One stage of rules (product or quote): rules decide, this class does the arithmetic. */
export class Stage {
  /** Per product id, for the product and settings objects it was built for. */
  private readonly products = new Map<string, ProductRules>();
  private readonly rates = new Map<string, Rate>();

  constructor(
    readonly rules: RuleSpec[],
    readonly derivedFacts: DerivedFactSpec[],
    private readonly options: StageOptions = {},
  ) {}

  async evaluate(
    baseFacts: { product?: { id: string }; settings: unknown } & Record<string, unknown>,
    decimals: number,
  ): Promise<StageOutcome> {
    const facts: Record<string, unknown> = { ...baseFacts };
    for (const spec of this.derivedFacts) facts[spec.name] = deriveFact(spec, facts);
    const rules = this.rulesFor(baseFacts.product, baseFacts.settings);
    const outcomes = await rules.decided.outcomes(facts);
    if (rules.pool) {
      const result = await rules.pool.run(facts);
      for (const r of result.results) outcomes.push(outcomeOf(r));
      for (const r of result.failureResults) outcomes.push(outcomeOf(r));
    }

    const fired = outcomes.filter((r) => r.result).sort(bySequenceThenName);
    const rejections: Rejection[] = [];
    const notOrderable: NotOrderableReason[] = [];
    const decisions: ServiceDecision[] = [];
    const lines: PriceLine[] = [];
    const amounts: Decimal[] = [];
    for (const r of fired) {
      const p = r.event!.params as Record<string, unknown>;
      switch (r.event!.type) {
        case 'reject':
          rejections.push(
            withoutUndefined({
              status: p.status as 409 | 422,
              code: String(p.code),
              message: fill(String(p.message), facts),
              pointer: p.pointer as string | undefined,
            }),
          );
          break;
        case 'not_orderable':
          notOrderable.push({ code: String(p.code), reason: fill(String(p.reason), facts) });
          break;
        case 'price_line':
          lines.push(this.priceLine(r.name, p, decimals, amounts));
          break;
        case 'refund_line': {
          const line = this.priceLine(r.name, p, decimals, amounts);
          line.direction = p.direction === 'deduct' ? 'deduct' : 'credit';
          if (line.direction === 'deduct') amounts[amounts.length - 1] = amounts[amounts.length - 1].negated();
          lines.push(line);
          break;
        }
        case 'transition':
        case 'enforce':
          decisions.push(
            withoutUndefined({
              kind: r.event!.type,
              to: p.to as string | undefined,
              code: p.code as string | undefined,
              reason: fill(String(p.reason), facts),
              actions: (p.actions ?? []) as ServiceAction[],
            }),
          );
          break;
      }
    }
    const total = rejections.length ? null : amounts.reduce((sum, amount) => sum.plus(amount), new Decimal(0));
    return {
      facts,
      trace: outcomes.map(traceEntry).sort((a, b) => compareText(a.rule, b.rule)),
      rejections,
      notOrderable,
      decisions,
      lines,
      total_atomic: total === null ? null : plain(total),
    };
  }

  /** Adds the line's amount to amounts. */
  private priceLine(rule: string, p: Record<string, unknown>, decimals: number, amounts: Decimal[]): PriceLine {
    const quantity = toDecimal(p.quantity ?? '0');
    if (!quantity || quantity.isNegative())
      throw new RuleEvaluationError(
        `rule ${rule}: quantity ${JSON.stringify(p.quantity)} is not a non-negative decimal`,
      );
    const rate = this.rate(rule, p, decimals);
    const amount = quantity.times(rate.value).ceil();
    amounts.push(amount);
    const line: PriceLine = { code: String(p.code) } as PriceLine;
    if (p.item !== undefined) line.item = String(p.item);
    line.quantity = plain(quantity);
    line.unit = String(p.unit);
    line.rate = rate.rate;
    line.rate_atomic = rate.rate_atomic;
    line.amount_atomic = plain(amount);
    line.amount = atomicToAmount(line.amount_atomic, decimals);
    return line;
  }

  /** The line's rate in atomic units, its texts computed once per rate and decimals. */
  private rate(rule: string, p: Record<string, unknown>, decimals: number): Rate {
    const atomic = p.rate_atomic !== undefined;
    const given = atomic ? p.rate_atomic : p.rate;
    const key = `${decimals} ${atomic} ${typeof given} ${String(given)}`;
    const known = this.rates.get(key);
    if (known) return known;
    const value = atomic ? toDecimal(given) : toDecimal(given)?.times(scale(decimals));
    if (!value || value.isNegative() || (atomic && !value.isInteger())) {
      throw new RuleEvaluationError(
        `rule ${rule}: rate ${JSON.stringify(p.rate_atomic ?? p.rate)} is not a non-negative rate ` +
          `(rate_atomic must be a whole number of atomic units)`,
      );
    }
    const rate = { value, rate: atomicToAmount(value, decimals), rate_atomic: plain(value) };
    if ((typeof given === 'string' || typeof given === 'number') && this.rates.size < MAX_RATES)
      this.rates.set(key, rate);
    return rate;
  }

  private rulesFor(product: { id: string } | undefined, settings: unknown): ProductRules {
    const key = product?.id ?? '';
    let rules = this.products.get(key);
    if (!rules || rules.product !== product || rules.settings !== settings) {
      const applicable = applicableRules(this.rules, product ? { product, settings } : { settings });
      const keyFacts = this.options.keyFacts ?? [];
      const once =
        this.options.decideOnce === false ? [] : applicable.filter((rule) => DecidedRules.canDecide(rule, keyFacts));
      const perRun = applicable.filter((rule) => !once.includes(rule));
      rules = {
        product,
        settings,
        decided: new DecidedRules(once, keyFacts),
        pool: perRun.length ? new EnginePool(perRun) : undefined,
      };
      this.products.set(key, rules);
    }
    return rules;
  }
}

function outcomeOf(r: RuleResult): RuleOutcome {
  const json = r.toJSON(false) as { conditions: unknown };
  return {
    name: String(r.name),
    result: Boolean(r.result),
    conditions: json.conditions,
    event: r.result ? (r.event as RuleOutcome['event']) : undefined,
  };
}

/** A rate as a price line shows it. */
interface Rate {
  value: Decimal;
  rate: string;
  rate_atomic: string;
}

/** How many rates one stage keeps: they come from the catalog, a few per product. */
const MAX_RATES = 256;
/** Replaces ${fact.path} in a rule's message with the value it names. */
function fill(template: string, facts: Record<string, unknown>): string {
  return template.replace(/\$\{([a-z_]+)(?:\.([a-z0-9_.]+))?\}/gi, (_, fact: string, path?: string) => {
    const value = readPath(facts[fact], path ?? '');
    return value === undefined || value === null ? '' : String(value);
  });
}

function traceEntry(r: RuleOutcome): TraceEntry {
  return r.result
    ? { rule: r.name, result: r.result, conditions: r.conditions, event: r.event }
    : { rule: r.name, result: r.result, conditions: r.conditions };
}

function bySequenceThenName(a: RuleOutcome, b: RuleOutcome): number {
  const sa = Number((a.event?.params as Record<string, unknown>)?.sequence ?? 0);
  const sb = Number((b.event?.params as Record<string, unknown>)?.sequence ?? 0);
  return sa - sb || compareText(String(a.name), String(b.name));
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function withoutUndefined<T extends object>(value: T): T {
  for (const key of Object.keys(value) as (keyof T)[]) if (value[key] === undefined) delete value[key];
  return value;
}
