export {
  ServiceRecords,
  ServiceStopped,
  listenerCapOf,
  SERVICE_ROW_COLUMNS,
  streamAddresses,
  type ServiceRow,
  type ServiceInsert,
  type ServiceDocument,
  type StreamingEndpoint,
} from './service-records.js';
export { paidUntil, firstExpiry } from './paid-until.js';
export {
  SERVICE_TRANSITIONS,
  IllegalServiceTransition,
  allowedTransition,
  transitionService,
  type ServiceStatus,
  type TransitionKind,
} from './service-transitions.js';
export { recordServiceEvent } from './service-events.js';
export { IcecastDecider, type InternalReaders } from './icecast-decider.js';
export { admitListener, releaseHostIcecastPlaces, type Admission } from './listener-admission.js';
export { ListenerPlaces, ADMISSION_CHANNEL } from './listener-places.js';
export { MediaLibrary, quotaOf, type MediaFile, type UploadLimits } from './media-library.js';
export { LifecycleWorker, type UsageMeter, type MountUsage, type AutoDjControl } from './lifecycle-worker.js';
export { IcecastUsageMeter } from './icecast-usage-meter.js';
export { AutoDjManager, AUTODJ_USER } from './autodj-manager.js';
export { RelayManager, RELAY_USER } from './relay-manager.js';
export type { StreamLoad } from './stream-load.js';
export { storageOf, replacePlaylist } from './playlist.js';
export { liveHoldingSql, type HolderScope } from './live-holdings.js';
export {
  NowPlaying,
  songText,
  TRACK_HISTORY,
  type Track,
  type NewTrack,
  type PlayedTrack,
  type TrackSource,
} from './now-playing.js';
export {
  ListenerSessions,
  clientNetwork,
  type ListenerSession,
  type ListenerAggregates,
  type ListenerPage,
  type ListenerProtocol,
} from './listener-sessions.js';
export { listenAddresses } from './listen-addresses.js';
