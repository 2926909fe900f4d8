import type { RecordingStorageUsage } from '../recordings/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps } from './operation-deps.js';

/** What the usage document reads beside the operations' objects: recordings' storage and the public address. */
export type UsageDeps = OperationDeps & {
  /** Absent where nothing records (streaming off). */
  recordingStorage?: RecordingStorageUsage;
  publicBaseUrl?: () => string;
};

/** What a service used against what was bought, and how it ended when it was stopped. */
export async function usage(deps: UsageDeps, service: ServiceRow) {
  const stopped = deps.refunds && (await deps.refunds.ofService(service.id));
  const recordings = deps.recordingStorage && (await deps.recordingStorage(service));
  const base = deps.publicBaseUrl?.();
  return {
    ok: true as const,
    usage: {
      ...(await deps.services!.usage(service, deps.media)),
      ...(recordings && { recording_storage: recordings }),
      ...(base && { stats_url: `${base}/services/${service.id}/stats` }),
      ...stopped,
    },
  };
}
