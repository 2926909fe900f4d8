export {
  buildIcecastConfig,
  ICECAST_PROXY_ADDRESSES,
  icecastCallbackUrl,
  escapeXml,
  ICECAST_CALLBACK_ACTIONS,
  type IcecastCallbackAction,
  type IcecastConfigOptions,
} from './icecast-config.js';
export {
  IcecastSupervisor,
  type IcecastSupervisorOptions,
  type IcecastSupervisorEvents,
  type IcecastStartedEvent,
  type IcecastExitedEvent,
} from './icecast-supervisor.js';
export {
  IcecastAdmin,
  IcecastAdminError,
  parseXml,
  type IcecastAdminOptions,
  type MountSummary,
  type MountStats,
  type ListenerInfo,
  type XmlElement,
} from './icecast-admin.js';
export {
  handleIcecastCallback,
  icecastResponseHeaders,
  hasBasicCredentials,
  parseMount,
  readCallbackForm,
  startCallbackServer,
  type Decision,
  type MountDecider,
  type SourceAuthRequest,
  type ListenerAuthRequest,
  type ListenerLeftEvent,
  type MountEvent,
  type CallbackServer,
  type CallbackServerOptions,
} from './icecast-callbacks.js';
export {
  AutoDj,
  PlayOrder,
  type AutoDjOptions,
  type AutoDjEvents,
  type AutoDjTrack,
  type EncoderExit,
} from './autodj.js';
export { probeTrack, type TrackInfo } from './track-decoder.js';
export { AUDIO_FORMATS, UnsupportedAudioError, runOnAudio, sniffAudioFormat, type AudioFormat } from './audio-input.js';
export {
  AccessLogReader,
  parseAccessLogLine,
  parseClfDate,
  defaultIsMount,
  type AccessLogEntry,
  type AccessLogPosition,
  type AccessLogReaderOptions,
  type AccessLogReadStats,
} from './access-log.js';
export {
  MountMeter,
  type MountSnapshot,
  type MountCounters,
  type MountMeterState,
  type MountMeterOptions,
  type MeterPoll,
  type InternalListeners,
} from './mount-meter.js';
export {
  SourceRateMonitor,
  allowedBytesPerSecond,
  type SourceRateOptions,
  type SourceRate,
  type OverLimit,
} from './source-rate.js';
export {
  SourceBudget,
  type SourceBudgetOptions,
  type SourceBudgetState,
  type SourceBudgetReading,
  type HostStall,
} from './source-budget.js';
export { mp3SampleRate, mp3EncoderArgs } from './mp3-encoding.js';
export { IcecastFrontDoor, FRONT_DOOR_USER, type FrontDoorOptions, type ForwardedClaim } from './front-door.js';
export {
  buildHaproxyConfig,
  claimProxied,
  HAPROXY_SOURCE_ADDRESS,
  type HaproxyConfigOptions,
} from './haproxy-config.js';
export {
  listclientsLagMs,
  placeKey,
  PROXY_QUEUE_SECONDS,
  PROXY_USER,
  reportedByProxy,
  type ListenerEnd,
  type ListenerEndListener,
} from './listener-end.js';
export {
  HaproxySupervisor,
  type HaproxySupervisorOptions,
  type HaproxySupervisorEvents,
  type HaproxyStartedEvent,
} from './haproxy-supervisor.js';
export { HlsFileServer, hlsFileServerInstalled, type HlsFileServerOptions } from './hls-file-server.js';
export { installed, openFilesHardLimit } from './host-system.js';
export type { HlsPlaylistSettings } from './hls-playlist-config.js';
