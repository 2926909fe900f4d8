import { Decimal, type PriceLine, type TraceEntry } from '../rules/index.js';
import { decimalsOf, type Snapshot } from './snapshot-shape.js';

/** One payment for a service: the hours it paid for and how many of them were left unused when the service ended. */
export interface RefundPayment {
  order_id: string;
  kind: 'order' | 'upgrade' | 'extension';
  amount_atomic: string;
  /** Decimal strings; "0" when the payment bought no hours (it then has no unused share). */
  hours: string;
  unused_hours: string;
  /**
   * The base fee in this payment's amount, kept once (the rules that read paid.unused_hours_atomic never refund it):
   * the order's, as its own price evaluation charged it. Absent: the product's base fee for the order, none for an
   * upgrade or an extension (their hours are all they buy).
   */
  base_atomic?: string;
  /** The wallet that made this payment, as its own Transfer log names it: what it gets back goes there. */
  payer?: string;
}

/** One transfer of a refund: what goes back to one wallet, for the payments it made. */
export interface RefundTransfer {
  payer: string;
  order_ids: string[];
  amount_atomic: string;
}

/**
 * Everything a refund depends on besides the snapshot, fixed when it was evaluated (at the stop, not when it is
 * sent), so that a replay depends neither on the clock nor on the service as it is later.
 */
export interface RefundInput {
  refund_id: string;
  service_id: string | null;
  product_id: string;
  reason: 'stopped' | 'provisioning_failed';
  /** When the service ended (its stop) or the order was given up: the unused hours are counted from here. */
  as_of: string;
  payments: RefundPayment[];
  /** Refunds already made for these payments. */
  refunded_atomic: string;
  transfer_used_gb: string;
}

export interface RefundEvaluation {
  facts: Record<string, unknown>;
  trace: TraceEntry[];
  lines: PriceLine[];
  /** Credits minus deductions, as the rules' lines add up (may be below zero). */
  total_atomic: string;
  /**
   * Who gets what (when every payment names its payer): one transfer per wallet, none below the minimum. The amount
   * is then their sum.
   */
  transfers?: RefundTransfer[];
  /** The money proven received for these payments, minus refunds already made: never refunded beyond this. */
  bound_atomic: string;
  minimum_atomic: string;
  /** What is sent: the total within the bound, or 0 below the minimum. */
  amount_atomic: string;
}

/**
 * A refund as the rules decide it (rules/refunds.json, stage "refund"). The facts give, per payment summed:
 * paid.unused_hours_atomic, its unused hours at the rate it bought them (its amount less its base fee, times the
 * unused share of the hours it paid for, rounded down: the base fee is kept once, never refunded), and
 * paid.unused_atomic, the unused share of its whole amount (what earlier rules credited before deducting the
 * base fee whole). An upgrade's amount is what was paid for it (the credit it was given is not money received, so it
 * is never refunded a second time).
 *
 * paid.unused_hours_atomic came after records were first stored: it is among the facts only for rules that read it,
 * so a record evaluated on earlier rules (its snapshot) replays with exactly the facts it was evaluated with.
 */
export async function evaluateRefund(snapshot: Snapshot, input: RefundInput): Promise<RefundEvaluation> {
  const entry = snapshot.catalog.byId.get(input.product_id);
  const received = input.payments.reduce((sum, p) => sum.plus(p.amount_atomic), new Decimal(0));
  const wholeShares = input.payments.map((p) => unusedShare(p, p.amount_atomic));
  const unused = sum(wholeShares);
  const byHours = readsUnusedHours(snapshot.rules.refund);
  const productBase = String(entry?.product.pricing?.base_atomic ?? '0');
  const hourShares = byHours ? input.payments.map((p) => unusedShare(p, hoursPart(p, productBase))) : undefined;
  const facts = {
    product: entry?.product ?? { id: input.product_id },
    settings: snapshot.catalog.settings,
    refund: { reason: input.reason, service_id: input.service_id, as_of: input.as_of },
    paid: {
      received_atomic: received.toFixed(0),
      unused_atomic: unused.toFixed(0),
      ...(hourShares && { unused_hours_atomic: sum(hourShares).toFixed(0) }),
      refunded_atomic: input.refunded_atomic,
    },
    usage: { transfer_used_gb: input.transfer_used_gb },
  };
  const outcome = await snapshot.rules.refund.evaluate(facts, entry ? decimalsOf(entry) : 6);
  const total = new Decimal(outcome.total_atomic ?? '0');
  const bound = Decimal.max(0, received.minus(input.refunded_atomic));
  const minimum = new Decimal(snapshot.catalog.settings.refunds?.minimum ?? '0').times(1_000_000).ceil();
  const within = Decimal.max(0, Decimal.min(total, bound));
  const amount = within.lessThan(minimum) ? new Decimal(0) : within;
  const named = input.payments.every((p) => p.payer);
  const shares = hourShares ?? wholeShares;
  const transfers = named ? splitByPayer(input.payments, shares, amount, minimum) : undefined;
  const sent = transfers ? transfers.reduce((sum, t) => sum.plus(t.amount_atomic), new Decimal(0)) : amount;
  const { product: _p, settings: _s, ...recorded } = facts;
  return {
    facts: { product_id: input.product_id, ...recorded },
    trace: outcome.trace,
    lines: outcome.lines,
    total_atomic: total.toFixed(0),
    bound_atomic: bound.toFixed(0),
    minimum_atomic: minimum.toFixed(0),
    ...(transfers && { transfers }),
    amount_atomic: sent.toFixed(0),
  };
}

function sum(values: Decimal[]): Decimal {
  return values.reduce((total, v) => total.plus(v), new Decimal(0));
}

/** Part of a payment's amount, times the unused part of the hours it paid for, rounded down. */
function unusedShare(p: RefundPayment, part: string | Decimal): Decimal {
  const hours = new Decimal(p.hours);
  if (hours.lessThanOrEqualTo(0)) return new Decimal(0);
  const left = Decimal.max(0, Decimal.min(hours, p.unused_hours));
  return new Decimal(part).times(left).dividedBy(hours).floor();
}

/** What a payment paid for its hours: its amount less the base fee in it (the order's; never below zero). */
function hoursPart(p: RefundPayment, productBase: string): Decimal {
  const base = p.base_atomic ?? (p.kind === 'order' ? productBase : '0');
  return Decimal.max(0, new Decimal(p.amount_atomic).minus(base));
}

const readingUnusedHours = new WeakMap<object, boolean>();

/** Whether a refund stage's rules read paid.unused_hours_atomic (in a condition or a line). */
function readsUnusedHours(stage: { rules: unknown[] }): boolean {
  let reads = readingUnusedHours.get(stage);
  if (reads === undefined) {
    const refers = (value: unknown): boolean => {
      if (Array.isArray(value)) return value.some(refers);
      if (!value || typeof value !== 'object') return false;
      const o = value as Record<string, unknown>;
      if (o.fact === 'paid' && typeof o.path === 'string' && o.path.replace(/^\$\./, '') === 'unused_hours_atomic')
        return true;
      return Object.values(o).some(refers);
    };
    reads = refers(stage.rules);
    readingUnusedHours.set(stage, reads);
  }
  return reads;
}

/**
 * Who gets the amount back when several wallets paid for one service (an order, then extensions or upgrades paid by
 * other wallets). It is given back to the payments latest paid first, each at most its own unused share, then (if the
 * rules credit more) at most what it paid: what the rules keep besides the base fee (transfer used; with earlier
 * rules, the base fee too) falls on the earliest payments, the order's first. So no wallet gets back more
 * than it paid, nor any of the money another wallet paid, whatever the order of payments. Per wallet, nothing below the minimum is sent (no gas spent on dust).
 */
function splitByPayer(
  payments: RefundPayment[],
  shares: Decimal[],
  amount: Decimal,
  minimum: Decimal,
): RefundTransfer[] {
  const given = payments.map(() => new Decimal(0));
  let left = amount;
  for (const cap of [(i: number) => shares[i], (i: number) => new Decimal(payments[i].amount_atomic)]) {
    for (let i = payments.length - 1; i >= 0 && left.greaterThan(0); i--) {
      const more = Decimal.min(left, Decimal.max(0, cap(i).minus(given[i])));
      given[i] = given[i].plus(more);
      left = left.minus(more);
    }
  }
  const byPayer = new Map<string, { order_ids: string[]; amount: Decimal }>();
  payments.forEach((p, i) => {
    const payer = p.payer!;
    const entry = byPayer.get(payer) ?? { order_ids: [], amount: new Decimal(0) };
    entry.order_ids.push(p.order_id);
    entry.amount = entry.amount.plus(given[i]);
    byPayer.set(payer, entry);
  });
  return [...byPayer]
    .filter(([, t]) => t.amount.greaterThan(0) && !t.amount.lessThan(minimum))
    .map(([payer, t]) => ({ payer, order_ids: t.order_ids, amount_atomic: t.amount.toFixed(0) }));
}
