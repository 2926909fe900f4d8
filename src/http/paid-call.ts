import type { Context } from 'koa';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { PaidCall } from '../operations/index.js';
import type { PlacedOrder } from '../orders/index.js';
import { discoveryOf, type PaidOperationName } from './paid-operations.js';

/**
 * A paid REST call as the operations take it: its PAYMENT-SIGNATURE, the public URL it buys, its bazaar declaration.
 */
export async function paidCall(
  ctx: Context,
  deps: { publicBaseUrl: () => string; live?: LiveSnapshot },
  name: PaidOperationName,
  /** What is bought, under /api/v1: /orders, /services/{id}/upgrade… */
  resource: string,
  productId: string,
): Promise<PaidCall> {
  return {
    signature: ctx.get('PAYMENT-SIGNATURE') || undefined,
    resourceUrl: `${deps.publicBaseUrl()}${resource}`,
    ...(deps.live && { discovery: await discoveryOf(deps.live, name, ctx.path, productId) }),
  };
}

/** A placed order as REST answers it: the order and service, the settlement in PAYMENT-RESPONSE. */
export function sendPlaced(ctx: Context, placed: PlacedOrder): void {
  ctx.state.orderId = placed.body.order.id;
  ctx.set('PAYMENT-RESPONSE', placed.paymentResponse);
  ctx.body = placed.body;
}
