import type { OrderRequest, PlacedOrder } from '../orders/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { paymentReady } from './refusals.js';

export interface OrderCall {
  apiKeyId: string;
  idempotencyKey: string;
  request: OrderRequest;
  payment: PaidCall;
}

/** Buys a new service: its 402 without a payment, the order and the service with one. */
export async function order(deps: OperationDeps, call: OrderCall): Promise<PlacedOrder> {
  const { payment, ...sale } = call;
  return paymentReady(deps).place({
    ...sale,
    paymentSignature: payment.signature,
    resourceUrl: payment.resourceUrl,
    ...(payment.discovery && { discovery: payment.discovery }),
  });
}
