import type Router from '@koa/router';
import { ApiError } from '../errors/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { CheckoutStatus } from './discovery-documents.js';
import { idempotencyKey } from './idempotency-key.js';
import { bodyReader } from './request-body.js';
import { orderRequestSchema } from './schemas.js';

const readOrderRequest = bodyReader(orderRequestSchema, 'order request');

/** POST /orders while machine payment is not configured on this deployment: authenticated, validated, then 503 (spec 5.5). */
export function orderRoutes(router: Router, deps: { keys: ApiKeys; checkout: CheckoutStatus }): void {
  router.post('/orders', async (ctx) => {
    await deps.keys.authenticate(ctx.get('Authorization') || undefined);
    idempotencyKey(ctx, true);
    await readOrderRequest(ctx);
    if (!deps.checkout.configured) {
      throw new ApiError(503, 'machine_payment_not_configured',
        `Machine payment is not configured on this deployment (${deps.checkout.reason}). Nothing was charged. Check agent_checkout in GET /api/v1/availability and try again once it says configured: true.`,
        { retryable: true, headers: { 'Retry-After': '3600' } });
    }
  });
}
