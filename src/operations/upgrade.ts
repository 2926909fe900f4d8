import { UpgradeSale, type PlacedOrder } from '../orders/index.js';
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
  const sale = new UpgradeSale(service, productId);
  return place(deps, { apiKeyId: service.api_key_id, idempotencyKey, sale }, payment);
}
