import { ApiError } from '../errors/index.js';
import type { Offer } from '../payments/index.js';
import { ServiceStopped } from '../services/index.js';
import { PaymentNotTaken, SettlementPending } from './advance.js';
import { ExtensionInFlight, UpgradeInFlight } from './claim-conflicts.js';
import { refundedError } from './order-document.js';
import type { OrderRow, OrderStore } from './order-store.js';
import { placeMessages as m } from './place-messages.js';

/** Why a claim was refused for a conflict with an order of the same service, as the agent reads it; else undefined. */
export function claimConflictError(e: unknown): ApiError | undefined {
  const retryLater = { retryable: true, retryAfterSeconds: 2 };
  if (e instanceof UpgradeInFlight) return new ApiError(409, 'upgrade_in_progress', m.upgradeInProgress, retryLater);
  if (e instanceof ExtensionInFlight) {
    return new ApiError(409, 'extension_in_progress', m.extensionInProgress, retryLater);
  }
  return undefined;
}

/** Why a claimed order was not delivered, as the agent reads it. */
export async function notDelivered(
  e: unknown,
  claimed: OrderRow,
  offer: Offer,
  store: { orders: OrderStore; refundAfterMs?: number },
): Promise<unknown> {
  if (e instanceof PaymentNotTaken) {
    return offer.paymentRequired('payment_failed', m.notTaken(`${e.reason}: ${e.message}`));
  }
  if (e instanceof ServiceStopped) {
    return new ApiError(409, 'service_stopped', m.serviceStopped, { details: [{ order_id: claimed.id }] });
  }
  if (e instanceof SettlementPending) {
    return new ApiError(503, 'settlement_pending', m.settlementPending(claimed.id, e.message, e.validUntil), {
      retryable: true,
      retryAfterSeconds: 5,
      details: [{ order_id: claimed.id }],
    });
  }
  return (await paidNotProvisioned(claimed.id, store)) ?? e;
}

/**
 * The payment was taken but provisioning failed: the order stays provisioning, retried, else refunded in full (maybe
 * already, by another instance's worker or recovery while this request waited).
 */
async function paidNotProvisioned(
  orderId: string,
  { orders, refundAfterMs }: { orders: OrderStore; refundAfterMs?: number },
): Promise<ApiError | undefined> {
  const order = await orders.byId(orderId).catch(() => undefined);
  if (order?.state === 'refunded') return refundedError(order);
  if (order?.state !== 'provisioning') return undefined;
  const bound = refundAfterMs === undefined ? '' : ` within ${Math.round(refundAfterMs / 1000)} s`;
  return new ApiError(
    503,
    'provisioning_pending',
    `The payment was taken (order ${order.id}) but the service could not be provisioned yet; it is retried ` +
      'automatically. Retry this same request with the same Idempotency-Key in a few seconds to get the service; ' +
      `you will not be charged twice. If it cannot be provisioned${bound}, everything it paid is refunded ` +
      `automatically: GET /orders/${order.id} shows the refund.`,
    { retryable: true, retryAfterSeconds: 5, details: [{ order_id: order.id }] },
  );
}
