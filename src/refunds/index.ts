export { Refunds, type StopOutcome } from './refunds.js';
export { RefundStore, refundNonce, type RefundRow } from './refund-store.js';
export { RefundWorker } from './refund-worker.js';
export { RefundWallet, type RefundWalletConfig } from './refund-wallet.js';
export { STOPPED_REASON } from './service-stop.js';
export type { RefundDeps, RefundSettings } from './refund-deps.js';
export type { MountCutter } from './mount-cut.js';
export type { RefundView } from './refund-view.js';
