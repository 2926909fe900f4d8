import type { Database } from '../store/index.js';
import type { BundleRefund } from './bundle.js';

/** The operator-signed receipt of a sent refund (the one the API gives its owner). */
export type RefundReceiptOf = (refund: BundleRefund) => Promise<BundleRefund['receipt']>;

type RefundRow = Omit<BundleRefund, 'sent_at' | 'receipt'> & { sent_at: Date | null };

/** The refunds that pay any of these orders back, with the transfers of a split one. */
export async function refundsOfOrders(
  db: Database,
  orderIds: string[],
  receiptOf?: RefundReceiptOf,
): Promise<BundleRefund[]> {
  if (!orderIds.length) return [];
  const rows = await db.query<RefundRow>(
    `SELECT id, part_of, service_id, order_id, order_ids, reason, status, payer, amount_atomic::text AS amount_atomic,
            evaluation_id, transaction, sent_at
     FROM refunds
     WHERE order_ids && $1::text[] OR order_id = ANY($1)
        OR part_of IN (SELECT id FROM refunds WHERE order_ids && $1::text[] OR order_id = ANY($1))
     ORDER BY created_at, id`,
    [orderIds],
  );
  const refunds: BundleRefund[] = [];
  for (const row of rows) {
    const refund: BundleRefund = { ...row, sent_at: row.sent_at?.toISOString() ?? null, receipt: null };
    if (refund.status === 'sent' && receiptOf) refund.receipt = await receiptOf(refund);
    refunds.push(refund);
  }
  return refunds;
}
