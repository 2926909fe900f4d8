export { ServiceRecords, type ServiceRow, type ServiceDocument, type StreamingEndpoint } from './service-records.js';
export { IcecastDecider } from './icecast-decider.js';
export { MediaLibrary, quotaOf, type MediaFile } from './media-library.js';
export { LifecycleWorker, type UsageMeter, type MountUsage, type AutoDjControl } from './lifecycle-worker.js';
