import type { PlaceOrder, PlacedOrder } from '../orders/index.js';
import type { OperationDeps, PaidCall } from './operation-deps.js';
import { paymentReady } from './refusals.js';

/** What a paid operation sells, before the transport's payment is added to it. */
export type SaleRequest = Omit<PlaceOrder, 'paymentSignature' | 'resourceUrl' | 'discovery'>;

/** Places a sale with the payment the call carries: its 402 without one, the order and its service with one. */
export async function place(deps: OperationDeps, sale: SaleRequest, payment: PaidCall): Promise<PlacedOrder> {
  return paymentReady(deps).place({
    ...sale,
    paymentSignature: payment.signature,
    resourceUrl: payment.resourceUrl,
    ...(payment.discovery && { discovery: payment.discovery }),
  });
}
