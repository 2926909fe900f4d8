export { Refunds, type StopOutcome } from './refunds.js';
export { RefundStore, refundNonce, type RefundRow } from './refund-store.js';
export { RefundWorker } from './refund-worker.js';
export { RefundWallet, type RefundWalletConfig } from './refund-wallet.js';
export { STOPPED_REASON } from './service-stop.js';
export type { RefundDeps, RefundSettings } from './refund-deps.js';
export type { MountCutter } from './mount-cut.js';
export type { RefundView } from './refund-view.js';
export { RefundRequests, type RecordedRefundRequest, type RequestedPayment } from './refund-requests.js';
export {
  refundRequestDigest,
  refundRequestSigner,
  refundRequestTypedData,
  type RefundRequest,
} from './refund-request-signature.js';
export { refundRequestSchema, REFUND_REASONS } from './refund-request-schema.js';
