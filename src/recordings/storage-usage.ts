import type { RecordingStore } from './recording-store.js';
import { type IncludedStorage, recordingStorageBytes } from './storage.js';

/** A service's recording storage as the usage document shows it: what it has, what its recordings take. */
export interface RecordingStorageFigures {
  /** The product's included storage (limits.recording_storage_mb). */
  included_mb: number;
  /** What the order bought on top (parameter recording_storage_gb; 0 when none). */
  recording_storage_gb: number;
  /** Included and bought together, in bytes. */
  bought_bytes: number;
  used_bytes: number;
  /** The recordings, complete or being made, that take it. */
  recordings: number;
}

/** The recording storage of a service, or undefined when its product does not record. */
export type RecordingStorageUsage = (service: {
  id: string;
  product_id: string;
  limits: Record<string, unknown>;
}) => Promise<RecordingStorageFigures | undefined>;

export function recordingStorageUsage(store: RecordingStore, included: IncludedStorage): RecordingStorageUsage {
  return async (service) => {
    const includedMb = included(service.product_id);
    if (!includedMb) return undefined;
    const extraGb = Number(service.limits.recording_storage_gb ?? 0);
    const { usedBytes, count } = await store.footprint(service.id);
    return {
      included_mb: includedMb,
      recording_storage_gb: Number.isFinite(extraGb) ? extraGb : 0,
      bought_bytes: recordingStorageBytes(service, included),
      used_bytes: usedBytes,
      recordings: count,
    };
  };
}
