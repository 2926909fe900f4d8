import { canonicalJson } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import { evaluateUpgrade, type Snapshot, type UpgradeEvaluation, type UpgradeInput } from '../pricing/index.js';
import type { ServiceRow } from '../services/index.js';
import type { Database } from '../store/index.js';
import type { OrderPrice } from './order-price.js';
import { serviceLimitsOf } from './service-limits.js';

export type PricedUpgrade = OrderPrice & {
  input: UpgradeInput;
  evaluation: Extract<UpgradeEvaluation, { outcome: 'priced' }>;
};

/**
 * The price of turning a service into another product for the rest of its paid time (see evaluateUpgrade). The
 * remaining hours are rounded up to 1/100 h; an upgrade that would change nothing is refused.
 */
export async function priceUpgrade(
  snapshot: Snapshot,
  service: ServiceRow,
  targetId: string,
  db: Database,
  now = Date.now(),
): Promise<PricedUpgrade> {
  const allowed = snapshot.catalog.settings.upgrades?.[service.product_id] ?? [];
  if (!allowed.includes(targetId)) {
    throw new ApiError(
      409,
      'upgrade_not_possible',
      allowed.length
        ? `A ${service.product_id} service can be upgraded to ${allowed.join(' or ')}, not to ${targetId}.`
        : `A ${service.product_id} service cannot be upgraded.`,
    );
  }
  if (service.status !== 'active' && service.status !== 'suspended') {
    throw new ApiError(
      409,
      'upgrade_not_possible',
      `The service is ${service.status}; only active or suspended services can be upgraded. Order a new one with POST /orders.`,
    );
  }
  const remainingMs = Math.max((service.expires_at?.getTime() ?? now) - now, 0);
  // The hours an upgrade paid for are the target hours in its own record; an extension's, its own configuration's
  // (the service's duration_hours then counts every extension too, so the order's own hours are read).
  const paid = await db.query<{ order_id: string; amount_atomic: string; hours: string | null }>(
    `SELECT o.id AS order_id, o.amount_atomic::text AS amount_atomic,
            CASE WHEN o.upgrade_of IS NOT NULL THEN r.record::jsonb #>> '{target,input,parameters,duration_hours}'
                 WHEN o.extension_of IS NOT NULL THEN o.configuration->>'duration_hours'
                 ELSE coalesce(o.configuration->>'duration_hours', $3::text) END AS hours
     FROM orders o LEFT JOIN audit_records r ON r.id = o.evaluation_id
     WHERE o.state = 'active' AND (o.id = $1 OR o.upgrade_of = $2 OR o.extension_of = $2) ORDER BY o.created_at, o.id`,
    [service.order_id, service.id, String(service.limits.duration_hours ?? 0)],
  );
  const input: UpgradeInput = {
    service_id: service.id,
    from_product_id: service.product_id,
    to_product_id: targetId,
    limits: service.limits,
    remaining_hours: Math.ceil(remainingMs / 36_000) / 100,
    paid: paid.map((p) => ({ order_id: p.order_id, amount_atomic: p.amount_atomic, hours: Number(p.hours ?? 0) })),
  };
  const evaluation = await evaluateUpgrade(snapshot, input);
  if (evaluation.outcome === 'refused') throw new ApiError(409, 'upgrade_not_possible', evaluation.message);
  const target = snapshot.catalog.byId.get(targetId)?.product;
  if (changesNothing(service, targetId, serviceLimitsOf(target, evaluation.target.output.configuration))) {
    throw new ApiError(
      409,
      'upgrade_changes_nothing',
      `The service already is ${targetId} with these limits; this upgrade would change nothing, so it is not sold. Upgrade to another product, or order a new service with POST /orders. (The same product again renews the bought transfer only once the service is suspended for using it up.)`,
    );
  }
  return { priced: evaluation.target, amountAtomic: evaluation.amount_atomic, input, evaluation };
}

/**
 * Same product, same limits as the upgrade would give (the paid time is never changed by an upgrade), and no used-up
 * transfer to renew.
 */
export function changesNothing(
  service: Pick<ServiceRow, 'product_id' | 'limits' | 'status'>,
  targetId: string,
  limits: Record<string, unknown>,
): boolean {
  if (service.product_id !== targetId || service.status === 'suspended') return false;
  const { duration_hours: _a, ...before } = service.limits;
  const { duration_hours: _b, ...after } = limits;
  return canonicalJson(before) === canonicalJson(after);
}
