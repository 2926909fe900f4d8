import { ExtensionSale, type PlacedOrder } from '../orders/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { place } from './place.js';

export interface ExtendCall {
  /** The service, already found to be the caller's. */
  service: ServiceRow;
  idempotencyKey: string;
  hours: number;
  payment: PaidCall;
}

/** Adds paid hours to a service, or brings an expired one back within its grace period. */
export function extend(
  deps: OperationDeps,
  { service, idempotencyKey, hours, payment }: ExtendCall,
): Promise<PlacedOrder> {
  const sale = new ExtensionSale(service, hours);
  return place(deps, { apiKeyId: service.api_key_id, idempotencyKey, sale }, payment);
}
