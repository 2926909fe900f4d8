import type { PlacedOrder } from '../orders/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { paymentReady } from './refusals.js';

export interface UpgradeCall {
  /** The service, already found to be the caller's. */
  service: ServiceRow;
  idempotencyKey: string;
  productId: string;
  payment: PaidCall;
}

/** Turns a service into another product for the rest of its paid time, paid by the order it answers with. */
export async function upgrade(deps: OperationDeps, call: UpgradeCall): Promise<PlacedOrder> {
  const { service, payment } = call;
  return paymentReady(deps).place({
    apiKeyId: service.api_key_id,
    idempotencyKey: call.idempotencyKey,
    request: { upgrade_of: service.id, product_id: call.productId },
    upgradeOf: service,
    paymentSignature: payment.signature,
    resourceUrl: payment.resourceUrl,
    ...(payment.discovery && { discovery: payment.discovery }),
  });
}
