export type OrderState = 'settling' | 'provisioning' | 'active' | 'failed' | 'refunded';

/**
 * Every state an order may go to from each state; the audit trail holds the chained history to the same table.
 * A new stream is settled and provisioned in one statement: settling → active. An order we could not provision is
 * refunded in full: it ends refunded, never active; so does one reported failed whose transfer the chain shows all
 * the same. Active and refunded are final.
 */
export const ORDER_TRANSITIONS: Readonly<Record<OrderState, readonly OrderState[]>> = {
  settling: ['provisioning', 'active', 'failed'],
  provisioning: ['active', 'failed', 'refunded'],
  active: [],
  failed: ['refunded'],
  refunded: [],
};

/** A state change the table does not allow: a bug in the caller, refused before any SQL is sent. */
export class IllegalOrderTransition extends Error {
  constructor(from: string, to: string) {
    super(`an order does not go from ${from} to ${to}`);
  }
}

export function allowedOrderTransition(from: string, to: string): boolean {
  return ORDER_TRANSITIONS[from as OrderState]?.includes(to as OrderState) ?? false;
}

/**
 * The UPDATE that moves the order $1 from `from` to `to`, writing `set` too (SQL assignments, parameters numbered by
 * the caller), and `RETURNING` what the caller asks for. It changes nothing when the order is no longer in `from`.
 * The only text in the code base that changes an order's state: OrderStore builds every change from it.
 */
export function orderTransitionSql(from: OrderState, to: OrderState, set: readonly string[], returning = ''): string {
  if (!allowedOrderTransition(from, to)) throw new IllegalOrderTransition(from, to);
  return `UPDATE orders SET state = '${to}', ${[...set, 'updated_at = now()'].join(', ')}
          WHERE id = $1 AND state = '${from}'${returning ? ` RETURNING ${returning}` : ''}`;
}
