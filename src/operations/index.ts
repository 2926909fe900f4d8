// The operations both transports sell: a REST route and an MCP tool each parse their call, run one of these and
// render its result or its refusal (an ApiError) in their own terms.
export type { OperationDeps, PaidCall } from './operation-deps.js';
export { order, type OrderCall } from './order.js';
export { upgrade, type UpgradeCall } from './upgrade.js';
export { extend, type ExtendCall } from './extend.js';
export { retainRecordings, type RetainRecordingsCall } from './retain-recordings.js';
export { stop } from './stop.js';
export { requestRefund, recordedRefund, type RefundAnswer } from './refund-request.js';
export { usage, type UsageDeps } from './usage.js';
export { status } from './status.js';
export { setPlaylist } from './playlist.js';
export { ownedService } from './owned-service.js';
export { productIdPattern } from './request-schemas.js';
export { discoveryDocuments, type CheckoutStatus, type DiscoveryDocuments } from './discovery-documents.js';
export { SERVICE_NAME, SERVICE_TAGS } from './service-name.js';
