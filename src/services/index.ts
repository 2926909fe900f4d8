export { ServiceRecords, listenerCapOf, type ServiceRow, type ServiceDocument, type StreamingEndpoint } from './service-records.js';
export { IcecastDecider } from './icecast-decider.js';
export { MediaLibrary, quotaOf, uploadLimitsFromEnv, type MediaFile, type UploadLimits } from './media-library.js';
export { LifecycleWorker, type UsageMeter, type MountUsage, type AutoDjControl } from './lifecycle-worker.js';
export { IcecastUsageMeter } from './icecast-usage-meter.js';
export { AutoDjManager, AUTODJ_USER } from './autodj-manager.js';
export { RelayManager, RELAY_USER } from './relay-manager.js';
export { StreamCapacity, type StreamLoad } from './stream-capacity.js';
export { registerStreamingHost } from './streaming-hosts.js';
