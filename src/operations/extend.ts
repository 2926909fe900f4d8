import type { PlacedOrder } from '../orders/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { paymentReady } from './refusals.js';

export interface ExtendCall {
  /** The service, already found to be the caller's. */
  service: ServiceRow;
  idempotencyKey: string;
  hours: number;
  payment: PaidCall;
}

/** Adds paid hours to a service (or brings an expired one back within its grace period). */
export async function extend(deps: OperationDeps, call: ExtendCall): Promise<PlacedOrder> {
  const { service, payment } = call;
  return paymentReady(deps).place({
    apiKeyId: service.api_key_id,
    idempotencyKey: call.idempotencyKey,
    request: { extension_of: service.id, duration_hours: call.hours },
    extensionOf: service,
    paymentSignature: payment.signature,
    resourceUrl: payment.resourceUrl,
    ...(payment.discovery && { discovery: payment.discovery }),
  });
}
