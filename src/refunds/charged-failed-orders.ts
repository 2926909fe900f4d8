import { chainChecked, failedOrders, paymentOf, refundChargedFailed, type OrderRow } from '../orders/index.js';
import { evidenceOnChain, expiredUnusedOnChain, type TransferProof } from '../payments/index.js';
import { computeRefund } from './refund-computation.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

/**
 * A failed order said "nothing was charged". That is true only once the chain shows its authorization can no longer be
 * used; an order failed on a facilitator's word while its transfer could still land (as every refusal did in
 * earlier versions) may have been charged all the same. Each failed order is looked up on chain until that is settled: one
 * whose transfer went through is refunded in full (the buyer was told to pay again), and ends `refunded`.
 */
export async function refundChargedFailedOrders(deps: RefundDeps, limit = 10): Promise<RefundRow[]> {
  const ledger = deps.ledger;
  if (!ledger) return [];
  const refunds: RefundRow[] = [];
  for (const order of await failedOrders(deps.db, { limit })) {
    const payment = paymentOf(order);
    const evidence = await evidenceOnChain(ledger, payment).catch(() => undefined);
    if (!evidence || evidence.kind === 'not_visible_yet') continue;
    if (evidence.kind === 'paid') {
      const refund = await refundInFull(deps, order, evidence.proof);
      if (refund) refunds.push(await computeRefund(deps, refund.id));
    } else if (evidence.kind !== 'unused' || (await expiredUnusedOnChain(ledger, payment).catch(() => false))) {
      await chainChecked(deps.db, order.id);
    }
  }
  return refunds;
}

/** The order becomes refunded with the proof of the payment it took, and its full refund enters the outbox. */
async function refundInFull(deps: RefundDeps, order: OrderRow, proof: TransferProof): Promise<RefundRow | undefined> {
  const settlement = {
    success: true,
    transaction: proof.transaction,
    network: order.network,
    payer: order.payer,
    proof,
  };
  const refund = await deps.db.transaction(async (client) => {
    const refunded = await refundChargedFailed(client, order.id, settlement, proof.transaction);
    return refunded ? deps.store.insertFailure(client, failureOf(order), new Date()) : undefined;
  });
  if (refund) {
    deps.log.warn(
      { order_id: order.id, refund_id: refund.id, transaction: proof.transaction },
      'an order reported failed was charged on chain: refunded in full',
    );
  }
  return refund;
}

/** The refund's order, and the service it was for: an upgrade's or an extension's (a new stream's never started). */
function failureOf(order: OrderRow): { id: string; api_key_id: string; service_id: string | null } {
  return { id: order.id, api_key_id: order.api_key_id, service_id: order.upgrade_of ?? order.extension_of ?? null };
}
