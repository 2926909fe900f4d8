import { NewStreamSale, type OrderRequest, type PlacedOrder } from '../orders/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { place } from './place.js';

export interface OrderCall {
  apiKeyId: string;
  idempotencyKey: string;
  request: OrderRequest;
  payment: PaidCall;
}

/** Buys a new service. */
export function order(
  deps: OperationDeps,
  { payment, apiKeyId, idempotencyKey, request }: OrderCall,
): Promise<PlacedOrder> {
  return place(deps, { apiKeyId, idempotencyKey, sale: new NewStreamSale(request) }, payment);
}
