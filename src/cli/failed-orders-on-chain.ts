import type { Address } from 'viem';
import type { ChainProblem } from '../audit/chain-problem.js';
import { failedOrders, paymentOf, type OrderRow } from '../orders/index.js';
import { AuthorizationLedger, takenOnChain, type TransferProof } from '../payments/index.js';
import type { Database } from '../store/index.js';

/**
 * The reconciliation of `audit verify` with the token: every failed order told its buyer that nothing was charged, so
 * an order whose own payment moved its price to payTo all the same is paid for nothing until it is refunded.
 * The chain decides, not the refund worker's memory of having looked (chain_checked_at): each failed order is asked.
 */
export async function chargedFailedOrders(
  db: Database,
  chain: { rpcUrl: string; asset: string },
): Promise<{ checked: number; problems: ChainProblem[] }> {
  const ledger = new AuthorizationLedger(chain.rpcUrl, chain.asset as Address);
  const failed = (await failedOrders(db)).map((order) => ({ ...paymentOf(order), order }));
  const taken = await takenOnChain(ledger, failed);
  return { checked: failed.length, problems: taken.map(({ payment, proof }) => charged(payment.order, proof)) };
}

function charged(order: OrderRow, proof: TransferProof): ChainProblem {
  return {
    seq: '-',
    id: order.id,
    undelivered: true,
    problem:
      `order ${order.id}: failed ("nothing was charged"), but its payment authorization moved ` +
      `${order.amount_atomic} atomic units to ${order.pay_to} in transaction ${proof.transaction}: ` +
      'charged on chain, neither delivered nor refunded',
  };
}
