export { OrderService, type OrderServiceOptions, type PlaceOrder, type PlacedOrder } from './order-service.js';
export {
  OrderStore,
  refundUndelivered,
  refundChargedFailed,
  failedOrders,
  chainChecked,
  type OrderRow,
} from './order-store.js';
export { paymentOf } from './order-payment.js';
export {
  ORDER_TRANSITIONS,
  IllegalOrderTransition,
  allowedOrderTransition,
  type OrderState,
} from './order-transitions.js';
export { OrderRecovery } from './recovery.js';
export { armCrashPoints } from './crash-point.js';
export type { OrderRequest } from './order-price.js';
export type { AdvanceDeps } from './advance.js';
export { extendHint } from './extension-price.js';
export { crashPoint, type CrashPoint } from './crash-point.js';
export { newcomerLimits } from './buyer-limits.js';
export { inFlightByHost, inFlightOrders } from './in-flight-load.js';
export { NewStreamSale } from './new-stream-sale.js';
export { UpgradeSale } from './upgrade-sale.js';
export { ExtensionSale } from './extension-sale.js';
export { RetentionSale } from './retention-sale.js';
export { RETENTION_PRODUCT } from './retention-price.js';
export type { SaleKind, PricedSale, Demand, Provisioning } from './sale-kind.js';
