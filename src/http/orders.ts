import type Router from '@koa/router';
import { ApiError } from '../errors/index.js';
import { KeyRevoked, type ApiKeys } from '../keys/index.js';
import type { OrderRequest, OrderService } from '../orders/index.js';
import type { Refunds } from '../refunds/index.js';
import { order } from '../operations/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { CheckoutStatus } from '../operations/discovery-documents.js';
import { idempotencyKey } from './idempotency-key.js';
import { paidCall, sendPlaced } from './paid-call.js';
import { withRefundTerms } from './refund-terms.js';
import { bodyReader } from './request-body.js';
import { orderRequestSchema } from './schemas.js';

const readOrderRequest = bodyReader<OrderRequest>(orderRequestSchema, 'order request');
const orderId = /^ra_[a-zA-Z0-9_-]{8,120}$/;

export interface OrderRouteDeps {
  keys: ApiKeys;
  checkout: CheckoutStatus;
  /** Absent while machine payment is not configured: POST /orders then answers 503 (spec 5.5). */
  orders?: OrderService;
  /** The refunds that pay an order back (its service stopped, or it could not be delivered). */
  refunds?: Refunds;
  publicBaseUrl: () => string;
  /** The catalog being served: its schemas go into the 402's bazaar declaration. */
  live?: LiveSnapshot;
}

export function orderRoutes(router: Router, deps: OrderRouteDeps): void {
  router.post('/orders', async (ctx) => {
    const authorization = ctx.get('Authorization') || undefined;
    const key = await deps.keys.authenticateForWrite(authorization);
    const idempotency = idempotencyKey(ctx, true)!;
    const request = await readOrderRequest(ctx);
    const call = await paidCall(ctx, deps, 'createOrder', '/orders', request.product_id);
    const payment = withRefundTerms(call, deps, request.parameters?.duration_hours);
    const placed = await order(deps, { apiKeyId: key.id, idempotencyKey: idempotency, request, payment }).catch((e) => {
      throw e instanceof KeyRevoked ? deps.keys.revokedDuringRequest(authorization) : e;
    });
    sendPlaced(ctx, placed);
  });

  router.get('/orders/:order_id', async (ctx) => {
    const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
    const id = ctx.params.order_id;
    const found = orderId.test(id) && deps.orders ? await deps.orders.get(key.id, id) : undefined;
    if (!found)
      throw new ApiError(
        404,
        'order_not_found',
        'There is no order with this id for your API key. Use the order.id returned by POST /orders.',
      );
    const refunds = deps.refunds ? await deps.refunds.ofOrder(id) : [];
    const service = found.service as { service_id?: string } | null;
    const ended =
      service?.service_id && deps.refunds ? (await deps.refunds.ofService(service.service_id))?.ended : undefined;
    ctx.body = {
      ok: true,
      ...found,
      ...(ended && { service_ended: ended }),
      ...(refunds.length && { refund: refunds[refunds.length - 1], refunds }),
    };
  });
}
