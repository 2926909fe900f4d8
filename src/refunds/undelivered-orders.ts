import { refundUndelivered } from '../orders/index.js';
import { computeRefund } from './refund-computation.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

/**
 * Paid orders we could not deliver are refunded in full: an order (or upgrade, or extension) still provisioning after
 * the bound, or at once when it never can be (its service was stopped while it was being paid). The order ends
 * refunded (a chained state) in the transaction that puts its refund in the outbox, so recovery stops retrying it;
 * the agent hears refund.sent (reason provisioning_failed) once the money is back.
 */
export async function refundUndeliveredOrders(deps: RefundDeps, limit = 10): Promise<RefundRow[]> {
  const refunds = await deps.db.transaction(async (client) => {
    const { rows } = await client.query(
      `SELECT o.id, o.api_key_id, coalesce(o.upgrade_of, o.extension_of, s.id) AS service_id,
              (t.stopped_at IS NOT NULL) AS service_stopped
       FROM orders o LEFT JOIN services s ON s.order_id = o.id LEFT JOIN services t ON t.id = coalesce(o.upgrade_of, o.extension_of)
       WHERE o.state = 'provisioning'
         AND (o.settled_at < now() - make_interval(secs => $1::double precision / 1000) OR t.stopped_at IS NOT NULL)
       ORDER BY o.settled_at LIMIT $2 FOR UPDATE OF o SKIP LOCKED`,
      [deps.settings.provisionTimeoutMs, limit],
    );
    const created: RefundRow[] = [];
    for (const order of rows as Array<{
      id: string;
      api_key_id: string;
      service_id: string | null;
      service_stopped: boolean;
    }>) {
      const why = order.service_stopped
        ? 'refunded in full: the service was stopped while this payment was being settled'
        : `refunded in full: it could not be provisioned within ${Math.round(deps.settings.provisionTimeoutMs / 1000)} s`;
      await refundUndelivered(client, order.id, why);
      const refund = await deps.store.insertFailure(client, order, new Date());
      created.push(refund);
    }
    return created;
  });
  const computed: RefundRow[] = [];
  for (const refund of refunds) {
    deps.log.warn({ order_id: refund.order_id, refund_id: refund.id }, 'paid order not delivered: refunded in full');
    computed.push(await computeRefund(deps, refund.id));
  }
  return computed;
}
