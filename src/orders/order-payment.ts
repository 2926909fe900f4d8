import type { PaymentRecord } from '../payments/index.js';
import type { OrderRow } from './order-store.js';

/** The order's payment as payments/ settles and proves it. */
export function paymentOf(order: OrderRow): PaymentRecord {
  return {
    payload: order.payment,
    requirements: order.requirements,
    payer: order.payer,
    reference: order.payment_reference,
    validUntil: order.payment_valid_until,
    payTo: order.pay_to,
    amountAtomic: order.amount_atomic,
    fromBlock: order.claim_block !== null ? BigInt(order.claim_block) : null,
  };
}
