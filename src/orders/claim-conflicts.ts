/**
 * Why OrderStore.claim could not insert an order: PostgreSQL's unique violations, named for what they mean to a sale.
 * The store maps constraint names to these; the order service maps these to what the agent reads.
 */
export class ClaimConflict extends Error {}

/** Another upgrade of the same service is being paid (orders_one_upgrade_in_flight). */
export class UpgradeInFlight extends ClaimConflict {}

/** Another extension of the same service is being paid (orders_one_extension_in_flight). */
export class ExtensionInFlight extends ClaimConflict {}

/** The payment-identifier already belongs to another order of this API key (orders_payment_id). */
export class PaymentIdTaken extends ClaimConflict {}

/** The authorization (payer, reference) already paid for an order; any other unique violation is reported as this. */
export class AuthorizationUsed extends ClaimConflict {}

const conflictByConstraint: Record<string, new (message: string, options: ErrorOptions) => ClaimConflict> = {
  orders_one_upgrade_in_flight: UpgradeInFlight,
  orders_one_extension_in_flight: ExtensionInFlight,
  orders_payment_id: PaymentIdTaken,
};

/** The named conflict for a PostgreSQL unique violation (23505); any other error as it is. */
export function claimConflictOf(e: unknown): unknown {
  const { code, constraint } = e as { code?: string; constraint?: string };
  if (code !== '23505') return e;
  const Conflict = (constraint !== undefined && conflictByConstraint[constraint]) || AuthorizationUsed;
  return new Conflict(`unique violation on ${constraint ?? 'an unnamed constraint'}`, { cause: e });
}
