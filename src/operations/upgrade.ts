import type { PlacedOrder } from '../orders/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { place } from './place.js';

export interface UpgradeCall {
  /** The service, already found to be the caller's. */
  service: ServiceRow;
  idempotencyKey: string;
  productId: string;
  payment: PaidCall;
}

/** Turns a service into another product for the rest of its paid time. */
export function upgrade(
  deps: OperationDeps,
  { service, idempotencyKey, productId, payment }: UpgradeCall,
): Promise<PlacedOrder> {
  const request = { upgrade_of: service.id, product_id: productId };
  return place(deps, { apiKeyId: service.api_key_id, idempotencyKey, request, upgradeOf: service }, payment);
}
