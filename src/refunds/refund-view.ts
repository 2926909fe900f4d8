import { atomicToAmount } from '../rules/index.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

type Amount = { amount: string; amount_atomic: string; currency: 'USDC'; decimals: 6 };
type Receipt = { format: 'jws'; signature: string };

/** One transfer of a refund: what goes back to one wallet that paid, and its proof once sent. */
export interface RefundTransferView {
  id: string;
  to: string | null;
  amount: Amount | null;
  order_ids: string[];
  status: 'pending' | 'sent' | 'failed';
  transaction: string | null;
  pending_reason: string | null;
  waits_for_operator: boolean;
  sent_at: string | null;
  receipt: Receipt | null;
}

/**
 * A refund as its owner reads it: amount, status, transaction, and once sent the operator-signed receipt. A service
 * paid by several wallets is refunded with one transfer per wallet (transfers); to, transaction and receipt are then
 * null at the top and given per transfer.
 */
export interface RefundView {
  id: string;
  reason: RefundRow['reason'];
  /** pending until proven on chain; sent with its transaction; none when there was nothing to refund. */
  status: 'pending' | 'sent' | 'failed' | 'none';
  amount: Amount | null;
  to: string | null;
  order_ids: string[];
  evaluation_id: string | null;
  transaction: string | null;
  /** Why it is not sent yet (wallet short of funds, waiting for an operator, nothing to refund). */
  pending_reason: string | null;
  waits_for_operator: boolean;
  created_at: string;
  sent_at: string | null;
  receipt: Receipt | null;
  transfers: RefundTransferView[];
}

type ViewDeps = Pick<RefundDeps, 'receipts' | 'network'> & { store: Pick<RefundDeps['store'], 'partsOf'> };

export async function refundView(deps: ViewDeps, row: RefundRow): Promise<RefundView> {
  const whole = {
    id: row.id,
    reason: row.reason,
    amount: amountOf(row),
    order_ids: row.order_ids,
    evaluation_id: row.evaluation_id,
    created_at: row.created_at.toISOString(),
  };
  if (row.status === 'split') {
    const transfers = await Promise.all((await deps.store.partsOf(row.id)).map((part) => transferView(deps, part)));
    const status = transfers.some((t) => t.status === 'failed')
      ? 'failed'
      : transfers.every((t) => t.status === 'sent')
        ? 'sent'
        : 'pending';
    return {
      ...whole,
      status,
      to: null,
      transaction: null,
      receipt: null,
      pending_reason: transfers.find((t) => t.pending_reason)?.pending_reason ?? null,
      waits_for_operator: transfers.some((t) => t.waits_for_operator),
      sent_at:
        status === 'sent'
          ? transfers
              .map((t) => t.sent_at!)
              .sort()
              .at(-1)!
          : null,
      transfers,
    };
  }
  const transfer = await transferView(deps, row);
  return {
    ...whole,
    status: row.status === 'none' ? 'none' : transfer.status,
    to: row.payer,
    transaction: row.transaction,
    receipt: transfer.receipt,
    pending_reason: transfer.pending_reason,
    waits_for_operator: transfer.waits_for_operator,
    sent_at: transfer.sent_at,
    transfers: row.status === 'none' || row.amount_atomic === null ? [] : [transfer],
  };
}

async function transferView(deps: ViewDeps, row: RefundRow): Promise<RefundTransferView> {
  const receipt =
    row.status === 'sent' && deps.receipts
      ? await deps.receipts.refundReceipt({
          refundId: row.id,
          serviceId: row.service_id,
          orderIds: row.order_ids,
          payer: row.payer!,
          network: deps.network,
          transaction: row.transaction!,
          issuedAt: row.sent_at!,
          evaluationId: row.evaluation_id,
          amountAtomic: row.amount_atomic!,
          reason: row.reason,
        })
      : null;
  return {
    id: row.id,
    to: row.payer,
    amount: amountOf(row),
    order_ids: row.order_ids,
    status: row.status === 'sent' || row.status === 'failed' ? row.status : 'pending',
    transaction: row.transaction,
    pending_reason:
      row.status === 'sent'
        ? null
        : (row.pending_reason ?? (row.status === 'computing' ? 'the amount is being computed' : null)),
    waits_for_operator: row.status === 'pending' && row.needs_approval && !row.approved_at,
    sent_at: row.sent_at?.toISOString() ?? null,
    receipt,
  };
}

function amountOf(row: RefundRow): Amount | null {
  if (row.amount_atomic === null) return null;
  const atomic = row.amount_atomic;
  return { amount: atomicToAmount(atomic, 6), amount_atomic: atomic, currency: 'USDC', decimals: 6 };
}
