import { ApiError } from '../errors/index.js';
import type { OrderService } from '../orders/index.js';
import type { OperationDeps } from './operation-deps.js';

/** The order machinery, or the 503 of a deployment where machine payment is not configured. */
export function paymentReady(deps: OperationDeps): OrderService {
  if (deps.orders) return deps.orders;
  const why = deps.checkout?.reason ? ` (${deps.checkout.reason})` : '';
  throw new ApiError(
    503,
    'machine_payment_not_configured',
    `Machine payment is not configured on this deployment${why}. Nothing was charged. Check agent_checkout in ` +
      'GET /api/v1/availability and try again once it says configured: true.',
    { retryable: true, retryAfterSeconds: 3600 },
  );
}

export function stopNotAvailable(): ApiError {
  return new ApiError(
    503,
    'stop_not_available',
    'Stopping services is not available on this deployment right now; the service keeps running until it expires. ' +
      'Retry later.',
    { retryable: true },
  );
}
