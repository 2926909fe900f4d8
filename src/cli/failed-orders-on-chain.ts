import type { Address } from 'viem';
import type { ChainProblem } from '../audit/chain-problem.js';
import { AuthorizationLedger } from '../payments/authorization-ledger.js';
import type { Database } from '../store/index.js';

/** A log search for an order failed before its claim height was recorded: the last day of Base blocks. */
const SEARCH_BLOCKS = 43_200n;
/** Orders looked up on the chain at once. */
const AT_ONCE = 8;

interface FailedOrder {
  id: string;
  payer: string;
  nonce: string;
  pay_to: string;
  amount_atomic: string;
  claim_block: string | null;
}

/**
 * The reconciliation of `audit verify` with the token: every failed order told its buyer that nothing was charged, so
 * an order whose own authorization moved its price to payTo all the same is paid for nothing until it is refunded.
 * The chain decides, not the refund worker's memory of having looked (chain_checked_at): each failed order is asked.
 */
export async function chargedFailedOrders(
  db: Database,
  chain: { rpcUrl: string; asset: string },
): Promise<{ checked: number; problems: ChainProblem[] }> {
  const ledger = new AuthorizationLedger(chain.rpcUrl, chain.asset as Address);
  const failed = await db.query<FailedOrder & Record<string, unknown>>(
    `SELECT id, payer, nonce, pay_to, amount_atomic::text AS amount_atomic, claim_block::text AS claim_block
     FROM orders WHERE state = 'failed' AND payer IS NOT NULL AND nonce IS NOT NULL ORDER BY id`,
  );
  const latest = failed.length ? await ledger.latestBlock() : 0n;
  const problems: ChainProblem[] = [];
  for (let i = 0; i < failed.length; i += AT_ONCE) {
    const found = await Promise.all(failed.slice(i, i + AT_ONCE).map((order) => charged(ledger, order, latest)));
    problems.push(...found.filter((p) => p !== undefined));
  }
  return { checked: failed.length, problems };
}

async function charged(
  ledger: AuthorizationLedger,
  order: FailedOrder,
  latest: bigint,
): Promise<ChainProblem | undefined> {
  if (!(await ledger.isUsed(order.payer, order.nonce))) return undefined;
  const fromBlock =
    order.claim_block !== null ? BigInt(order.claim_block) : latest > SEARCH_BLOCKS ? latest - SEARCH_BLOCKS : 0n;
  const evidence = await ledger.evidence({
    payer: order.payer,
    nonce: order.nonce,
    payTo: order.pay_to,
    amount: order.amount_atomic,
    fromBlock,
  });
  if (evidence.kind !== 'paid') return undefined;
  return {
    seq: '-',
    id: order.id,
    undelivered: true,
    problem:
      `order ${order.id}: failed ("nothing was charged"), but its payment authorization moved ` +
      `${order.amount_atomic} atomic units to ${order.pay_to} in transaction ${evidence.proof.transaction}: ` +
      'charged on chain, neither delivered nor refunded',
  };
}
