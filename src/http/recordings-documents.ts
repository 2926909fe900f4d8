import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import type { Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { ListenPages } from '../listen/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { includedStorageOf, type Recording, type RecordingStore, recordingStorageBytes } from '../recordings/index.js';
import type { MediaLibrary, ServiceRecords, ServiceRow } from '../services/index.js';
import { ownedServiceOf } from './owned-service.js';

export interface RecordingRouteDeps {
  keys: ApiKeys;
  live: LiveSnapshot;
  services?: ServiceRecords;
  callers?: Callers;
  publicBaseUrl: () => string;
  listen?: ListenPages;
  media?: MediaLibrary;
}

export const podcastFeedUrl = (apiBaseUrl: string, serviceId: string) =>
  `${apiBaseUrl}/services/${serviceId}/podcast.xml`;
const downloadUrl = (apiBaseUrl: string, r: Recording) =>
  `${apiBaseUrl}/services/${r.service_id}/recordings/${r.id}.${r.file_name.split('.').pop()}`;

/** A recording as its owner and the feed's readers see it. */
export function recordingDocument(apiBaseUrl: string, r: Recording) {
  return {
    recording_id: r.id,
    status: r.status,
    started_at: r.started_at.toISOString(),
    ended_at: r.ended_at?.toISOString() ?? null,
    duration_seconds: r.duration_seconds,
    size_bytes: r.size_bytes,
    content_type: r.content_type,
    titles: r.titles,
    source_sessions: r.sessions,
    stop_reason: r.stop_reason,
    kept_until: r.kept_until?.toISOString() ?? null,
    download_url: downloadUrl(apiBaseUrl, r),
  };
}

/** The recording storage a service has (its product's included storage and what it bought), in bytes. */
export function storageOfService(service: ServiceRow, deps: Pick<RecordingRouteDeps, 'live'>): number {
  return recordingStorageBytes(
    service,
    includedStorageOf(() => deps.live.current.catalog.products),
  );
}

export function recordingNotFound(): ApiError {
  return new ApiError(
    404,
    'recording_not_found',
    'This service has no recording with this id. GET /services/{service_id}/recordings lists them.',
  );
}

/** The caller's service, with the recordings and the media storage (503 without streaming on this deployment). */
export async function ownedRecordings(ctx: Context, deps: RecordingRouteDeps) {
  const service = await ownedServiceOf(ctx, deps);
  return { service, ...recordingParts(deps) };
}

export function recordingParts(deps: RecordingRouteDeps): { store: RecordingStore; media: MediaLibrary } {
  if (!deps.listen || !deps.media) {
    throw new ApiError(
      503,
      'not_available',
      'Recordings are not available on this deployment (streaming is off). Check GET /api/v1/availability.',
      { retryable: true },
    );
  }
  return { store: deps.listen.recordings, media: deps.media };
}
