import type { RefundReceiptOf } from '../audit/index.js';
import type { HeadSigner } from '../audit/signing.js';

/** The receipts of sent refunds, signed as the API signs them for their owners (same key, network and fields). */
export async function refundReceipts(signer: HeadSigner, network: string): Promise<RefundReceiptOf> {
  const { OfferReceipts } = await import('../payments/receipts.js');
  const receipts = new OfferReceipts(signer, 0);
  return (refund) =>
    receipts.refundReceipt({
      refundId: refund.id,
      serviceId: refund.service_id,
      orderIds: refund.order_ids,
      payer: refund.payer!,
      network,
      transaction: refund.transaction!,
      issuedAt: new Date(refund.sent_at!),
      evaluationId: refund.evaluation_id,
      amountAtomic: refund.amount_atomic!,
      reason: refund.reason,
    });
}
