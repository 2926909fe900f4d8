import { refundChargedFailed } from '../orders/index.js';
import type { ExpectedPayment, TransferProof } from '../payments/index.js';
import { computeRefund } from './refund-computation.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

/** A log search from before a claim height was recorded: the last day of Base blocks (2 s each). */
const LEGACY_SEARCH_BLOCKS = 43_200n;

interface FailedOrder {
  id: string;
  api_key_id: string;
  service_id: string | null;
  network: string;
  payer: string;
  nonce: string;
  pay_to: string;
  amount_atomic: string;
  valid_before: string;
  claim_block: string | null;
}

/**
 * A failed order said "nothing was charged". That is true only once the chain shows its authorization can no longer be
 * used; an order failed on a facilitator's word while its transfer could still land (as every refusal did in
 * earlier versions) may have been charged all the same. Each failed order is looked up on chain until that is settled: one
 * whose transfer went through is refunded in full (the buyer was told to pay again), and ends `refunded`.
 */
export async function refundChargedFailedOrders(deps: RefundDeps, limit = 10): Promise<RefundRow[]> {
  const ledger = deps.ledger;
  if (!ledger) return [];
  const failed = await deps.db.query<FailedOrder & Record<string, unknown>>(
    `SELECT o.id, o.api_key_id, coalesce(o.upgrade_of, o.extension_of) AS service_id, o.network, o.payer, o.nonce,
            o.pay_to, o.amount_atomic::text AS amount_atomic, o.valid_before::text AS valid_before,
            o.claim_block::text AS claim_block
     FROM orders o WHERE o.state = 'failed' AND o.chain_checked_at IS NULL
     ORDER BY o.updated_at LIMIT $1`,
    [limit],
  );
  const refunds: RefundRow[] = [];
  for (const order of failed) {
    const evidence = await ledger.evidence(await expected(order, deps)).catch(() => undefined);
    if (!evidence || evidence.kind === 'not_visible_yet') continue;
    if (evidence.kind === 'paid') {
      const refund = await refundInFull(deps, order, evidence.proof);
      if (refund) refunds.push(await computeRefund(deps, refund.id));
    } else if (evidence.kind !== 'unused' || (await unusable(deps, order))) {
      await deps.db.query('UPDATE orders SET chain_checked_at = now() WHERE id = $1', [order.id]);
    }
  }
  return refunds;
}

async function expected(order: FailedOrder, deps: RefundDeps): Promise<ExpectedPayment> {
  let fromBlock = order.claim_block !== null ? BigInt(order.claim_block) : -1n;
  if (fromBlock < 0n) {
    const latest = await deps.ledger!.latestBlock();
    fromBlock = latest > LEGACY_SEARCH_BLOCKS ? latest - LEGACY_SEARCH_BLOCKS : 0n;
  }
  return { payer: order.payer, nonce: order.nonce, payTo: order.pay_to, amount: order.amount_atomic, fromBlock };
}

function unusable(deps: RefundDeps, order: FailedOrder): Promise<boolean> {
  return deps.ledger!.expiredUnused(order.payer, order.nonce, order.valid_before).catch(() => false);
}

/** The order becomes refunded with the proof of the payment it took, and its full refund enters the outbox. */
async function refundInFull(
  deps: RefundDeps,
  order: FailedOrder,
  proof: TransferProof,
): Promise<RefundRow | undefined> {
  const settlement = {
    success: true,
    transaction: proof.transaction,
    network: order.network,
    payer: order.payer,
    proof,
  };
  const refund = await deps.db.transaction(async (client) => {
    const refunded = await refundChargedFailed(client, order.id, settlement, proof.transaction);
    return refunded ? deps.store.insertFailure(client, order, new Date()) : undefined;
  });
  if (refund) {
    deps.log.warn(
      { order_id: order.id, refund_id: refund.id, transaction: proof.transaction },
      'an order reported failed was charged on chain: refunded in full',
    );
  }
  return refund;
}
