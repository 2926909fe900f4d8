export { AuditLog, type StoredRecord, type ListFilter } from './audit-log.js';
export type { ChainProblem } from './chain-problem.js';
export { Replayer, replayRecordText, snapshotCache, EVALUATION_KINDS, type ReplayReport } from './replay.js';
export {
  priceRecord,
  priceRecordText,
  upgradeRecord,
  type PriceRecord,
  type PriceRecordText,
  type UpgradeRecord,
} from './record.js';
export { extensionRecord, type ExtensionRecord } from './extension-record.js';
export { TextTemplate } from './text-template.js';
export { canonicalJson, sha256 } from './canonical.js';
export { HeadSigner, loadSigningKey, signedHeadProblem, type SignedCheckpoint, type SignedHead } from './signing.js';
export { HeadPublisher, signCurrentHead } from './head-publisher.js';
export { exportBundle, type BundleSelection } from './bundle-export.js';
export type { RefundReceiptOf } from './bundle-refunds.js';
export type { AuditBundle, BundleRefund } from './bundle.js';
export { verifyBundle } from './bundle-verify.js';
export { refundRecord, refundProofRecord, type RefundRecord, type RefundProofRecord } from './refund-record.js';
