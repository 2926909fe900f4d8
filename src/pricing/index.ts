export { readSnapshotFiles, snapshotHash, type SnapshotFiles } from './files.js';
export { openSnapshot, type Snapshot, type ProductVerdict } from './snapshot.js';
export { evaluatePrice, type PriceInput, type PriceOutput, type PriceEvaluation } from './evaluate.js';
export { configurations, thresholds, type GridOptions } from './grid.js';
export { evaluateUpgrade, type UpgradeInput, type UpgradeEvaluation } from './upgrade.js';
export { billingOptions, BILLINGS, type Billing, type BillingOption } from './billing-options.js';
export {
  evaluateExtension,
  extensionHeadroomHours,
  type ExtensionInput,
  type ExtensionEvaluation,
} from './extension.js';
export {
  evaluateRefund,
  type RefundInput,
  type RefundPayment,
  type RefundEvaluation,
  type RefundTransfer,
} from './refund.js';
export { SnapshotCache, KeyedSnapshotCache } from './snapshot-cache.js';
