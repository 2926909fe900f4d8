import { ApiError } from '../errors/index.js';
import type { SettleResponse } from '../payments/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { OrderRow } from './order-store.js';

/** An order as GET /orders/{id} and every paid answer show it. */
export function orderDocument(order: OrderRow): Record<string, unknown> {
  return {
    id: order.id,
    status: order.state,
    product_id: order.product_id,
    billing: order.billing,
    configuration: order.configuration,
    amount: {
      amount: atomicToAmount(order.amount_atomic, 6),
      amount_atomic: order.amount_atomic,
      currency: 'USDC',
      decimals: 6,
    },
    quote_id: order.quote_id,
    evaluation_id: order.evaluation_id,
    ...(order.upgrade_of && { upgrade_of: order.upgrade_of }),
    ...(order.extension_of && { extension_of: order.extension_of }),
    payment: {
      protocol: 'x402',
      network: order.network,
      payer: order.payer,
      transaction: (order.settlement as { transaction?: string } | null)?.transaction ?? null,
      block_number: (order.settlement as { proof?: { block_number?: string } } | null)?.proof?.block_number ?? null,
    },
    failure: order.failure,
    created_at: order.created_at.toISOString(),
    settled_at: order.settled_at?.toISOString() ?? null,
  };
}

/** The settlement an active order's PAYMENT-RESPONSE repeats. */
export function settlementOf(order: OrderRow): SettleResponse {
  const s = order.settlement as Partial<SettleResponse> | null;
  return {
    success: true,
    transaction: s?.transaction ?? '',
    network: (s?.network ?? order.network) as SettleResponse['network'],
    payer: s?.payer ?? order.payer,
  };
}

/** The order was paid but not delivered: it is refunded in full. */
export function refundedError(order: OrderRow): ApiError {
  return new ApiError(
    409,
    'order_refunded',
    `This order was paid but could not be delivered (${order.failure ?? 'not provisioned'}); everything it paid is ` +
      `refunded. GET /orders/${order.id} shows the refund and its transaction. Order again with a new Idempotency-Key ` +
      'if you still need the service.',
    { details: [{ order_id: order.id }] },
  );
}
