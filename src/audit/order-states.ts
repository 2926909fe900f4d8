import { canonicalJson } from './canonical.js';
import type { ChainProblem } from './chain-problem.js';
import { allowedOrderTransition } from '../orders/order-transitions.js';

/** Fields of an order that may change after its claim; every other field is the order's terms. */
const MUTABLE = new Set(['state', 'settlement', 'failure', 'settled_at']);

/** States an order reaches only once its payment is proven (a refund follows a payment too). */
const PAID = new Set(['provisioning', 'active', 'refunded']);

interface Chained {
  seq: string;
  state: Record<string, unknown>;
}

/** The chained states of every order, and the amounts of the evaluations that priced them, met while walking the chain. */
export class OrderStates {
  private readonly history = new Map<string, Chained[]>();
  private readonly charged = new Map<string, string>();

  add(seq: string, state: Record<string, unknown>): void {
    const id = String(state.order_id);
    this.history.set(id, [...(this.history.get(id) ?? []), { seq, state }]);
  }

  /** Order and upgrade evaluations: the amount they say is charged (a quote-locked order's price is the quote's). */
  evaluation(id: string, body: Record<string, unknown>): void {
    if (body.kind === 'upgrade_price' || body.kind === 'extension_price')
      this.charged.set(id, String(body.amount_atomic));
    if (body.kind === 'order_price')
      this.charged.set(id, String((body.output as { total_atomic?: string } | undefined)?.total_atomic));
  }

  chargedBy(evaluationId: string): string | undefined {
    return this.charged.get(evaluationId);
  }
  last(id: string): Chained | undefined {
    return this.history.get(id)?.at(-1);
  }
  ids(): Iterable<string> {
    return this.history.keys();
  }
  entries(): Iterable<[string, Chained[]]> {
    return this.history.entries();
  }
}

/** An order's terms never change after its claim, its state only moves forward, and it charges what its evaluation says. */
export function checkOrderHistory(orders: OrderStates): ChainProblem[] {
  const problems: ChainProblem[] = [];
  for (const [id, states] of orders.entries()) {
    for (let i = 1; i < states.length; i++) {
      const before = states[i - 1].state;
      const after = states[i].state;
      for (const field of Object.keys({ ...before, ...after })) {
        if (!MUTABLE.has(field) && canonicalJson(before[field] ?? null) !== canonicalJson(after[field] ?? null)) {
          problems.push({
            seq: states[i].seq,
            id,
            problem: `order ${id}: ${field} changed from ${canonicalJson(before[field] ?? null)} to ${canonicalJson(after[field] ?? null)}; an order's terms never change after its claim`,
          });
        }
      }
      if (before.state !== after.state && !allowedOrderTransition(String(before.state), String(after.state))) {
        problems.push({
          seq: states[i].seq,
          id,
          problem: `order ${id}: state went from ${before.state} to ${after.state}, which no order does`,
        });
      }
      if (PAID.has(String(after.state)) && (after.settlement ?? null) === null) {
        problems.push({
          seq: states[i].seq,
          id,
          problem: `order ${id}: ${after.state} without a settlement; an order is provisioned only once it is paid`,
        });
      }
    }
    const first = states[0].state;
    const priced = first.evaluation_id ? orders.chargedBy(String(first.evaluation_id)) : undefined;
    if (priced !== undefined && first.quote_id === null && priced !== first.amount_atomic) {
      problems.push({
        seq: states[0].seq,
        id,
        problem: `order ${id}: charged ${first.amount_atomic} atomic units but its evaluation ${first.evaluation_id} says ${priced}`,
      });
    }
  }
  return problems;
}
