export { HlsManager, type HlsClient, type HlsManagerOptions, type PassedOn } from './manager.js';
export { withHlsUsage } from './usage-totals.js';
export { hlsUrlFor, HLS_SEGMENT_MAX_AGE_SECONDS, HLS_SEGMENT_SECONDS } from './url.js';
export type { HlsSession } from './sessions.js';
