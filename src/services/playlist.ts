import { ApiError } from '../errors/index.js';
import type { MediaLibrary } from './media-library.js';
import type { ServiceRecords, ServiceRow } from './service-records.js';

/** The AutoDJ storage of a service whose files may be changed now: 409 when it has none or is not active. */
export function storageOf(media: MediaLibrary | undefined, service: ServiceRow): MediaLibrary {
  if (!media || !service.limits.storage_mb) {
    throw new ApiError(
      409,
      'storage_not_included',
      'This service has no AutoDJ storage. Storage comes with an AutoDJ: order a product whose limits say autodj: true ' +
        '(GET /products), or one that takes the order parameter autodj, with autodj: true.',
    );
  }
  if (service.status !== 'active')
    throw new ApiError(
      409,
      'service_not_active',
      `The service is ${service.status}; files can only be changed while it is active.`,
    );
  return media;
}

/** Sets the AutoDJ playlist of a service to uploaded files only: 422 unknown_files naming each file that is not there. */
export async function replacePlaylist(
  records: ServiceRecords,
  media: MediaLibrary | undefined,
  service: ServiceRow,
  playlist: string[],
  shuffle?: boolean,
): Promise<ServiceRow> {
  const names = new Set((await storageOf(media, service).list(service.id)).map((f) => f.name));
  const missing = playlist.filter((n) => !names.has(n));
  if (missing.length) {
    throw new ApiError(
      422,
      'unknown_files',
      `The playlist names files that are not uploaded: ${missing.join(', ')}. Upload them first with PUT /services/{service_id}/files/{name}.`,
      {
        details: missing.map((n) => ({
          pointer: `/playlist/${playlist.indexOf(n)}`,
          code: 'unknown_file',
          message: `${n} is not uploaded`,
        })),
      },
    );
  }
  return records.setPlaylist(service.id, playlist, shuffle ?? service.shuffle);
}
