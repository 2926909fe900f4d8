import { ApiError } from '../errors/index.js';
import type { Client } from '../store/index.js';

/**
 * An upgrade and an extension of one service are each priced on the service as it is (the extension at its product's
 * rates, the upgrade for its remaining hours), but change it only once paid and provisioned. Claimed while the other
 * kind is in flight (claimed, not yet applied), each would be applied over the other's change: 40 hours extended at the
 * old product's rate, then upgraded to a dearer one for the hours it had before. So the second claim is refused,
 * before any money moves. Run after the service's row lock (taken by both claims, by settlement and by provisioning):
 * an order of the other kind is then either still in flight here, or applied (and the service row changed with it).
 */
export async function refuseWhileOtherPaid(
  client: Client,
  serviceId: string,
  other: 'upgrade' | 'extension',
): Promise<void> {
  const column = other === 'upgrade' ? 'upgrade_of' : 'extension_of';
  const { rows } = await client.query(
    `SELECT id FROM orders WHERE ${column} = $1 AND state IN ('settling', 'provisioning') LIMIT 1`,
    [serviceId],
  );
  if (!rows.length) return;
  const self = other === 'upgrade' ? 'extension' : 'upgrade';
  const again = other === 'upgrade' ? 'extend it again' : 'ask for the upgrade again';
  throw new ApiError(
    409,
    `${other}_in_progress`,
    `An ${other} of this service (order ${rows[0].id}) is being paid right now, and this ${self} was priced on the service as it was before it; nothing was charged for this one. Read the service (GET /services/{service_id}) in a few seconds and ${again} if it still needs it: it is priced then on the service as it has become.`,
    { retryable: true, retryAfterSeconds: 2, details: [{ order_id: rows[0].id }] },
  );
}
