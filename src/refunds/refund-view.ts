import { atomicToAmount } from '../rules/index.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

/** A refund as its owner reads it: amount, status, transaction, and once sent the operator-signed receipt. */
export interface RefundView {
  id: string;
  reason: RefundRow['reason'];
  /** pending until proven on chain; sent with its transaction; none when there was nothing to refund. */
  status: 'pending' | 'sent' | 'failed' | 'none';
  amount: { amount: string; amount_atomic: string; currency: 'USDC'; decimals: 6 } | null;
  to: string | null;
  order_ids: string[];
  evaluation_id: string | null;
  transaction: string | null;
  /** Why it is not sent yet (wallet short of funds, waiting for an operator, nothing to refund). */
  pending_reason: string | null;
  waits_for_operator: boolean;
  created_at: string;
  sent_at: string | null;
  receipt: { format: 'jws'; signature: string } | null;
}

export async function refundView(deps: Pick<RefundDeps, 'receipts' | 'network'>, row: RefundRow): Promise<RefundView> {
  const receipt = row.status === 'sent' && deps.receipts
    ? await deps.receipts.refundReceipt({
      refundId: row.id, serviceId: row.service_id, orderIds: row.order_ids, payer: row.payer!, network: deps.network, transaction: row.transaction!,
      issuedAt: row.sent_at!, evaluationId: row.evaluation_id, amountAtomic: row.amount_atomic!, reason: row.reason,
    })
    : null;
  return {
    id: row.id,
    reason: row.reason,
    status: row.status === 'computing' ? 'pending' : row.status,
    amount: row.amount_atomic === null ? null : { amount: atomicToAmount(row.amount_atomic, 6), amount_atomic: row.amount_atomic, currency: 'USDC', decimals: 6 },
    to: row.payer,
    order_ids: row.order_ids,
    evaluation_id: row.evaluation_id,
    transaction: row.transaction,
    pending_reason: row.status === 'sent' ? null : row.pending_reason ?? (row.status === 'computing' ? 'the amount is being computed' : null),
    waits_for_operator: row.status === 'pending' && row.needs_approval && !row.approved_at,
    created_at: row.created_at.toISOString(),
    sent_at: row.sent_at?.toISOString() ?? null,
    receipt,
  };
}
