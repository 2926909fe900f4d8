export { audioDuration } from './audio-duration.js';
export { type ByteRange, byteRangeOf } from './byte-range.js';
export { startCapture, streamFormatOf, type StreamFormat } from './capture.js';
export { ownReaders, type OwnReader } from './internal-readers.js';
export { type EnclosureUrl, type FeedChannel, itunesDuration, podcastFeedXml } from './podcast-feed.js';
export {
  finishedRecordings,
  keepRecordings,
  keptUntil,
  missingRecordings,
  type RecordingKept,
  type RetainedRecording,
} from './recording-retention.js';
export { RECORDER_AGENT, RECORDER_USER, Recorder, type RecorderOptions } from './recorder.js';
export { removeShowFiles } from './show-parts.js';
export {
  type PlayedTitle,
  type Recording,
  type RecordingSetting,
  RecordingStore,
} from './recording-store.js';
export {
  type RecordingStorageFigures,
  type RecordingStorageUsage,
  recordingStorageUsage,
} from './storage-usage.js';
export { type IncludedStorage, includedStorageOf, recordingStorageBytes, storageProblem } from './storage.js';
