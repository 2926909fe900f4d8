import { ApiError } from '../errors/index.js';
import { randomId } from '../ids/index.js';
import type { Database } from '../store/index.js';
import type { ServiceRow } from './service-records.js';

const MB = 1024 * 1024;

/**
 * Storage set aside for uploads in progress (table upload_reservations). A reservation is taken before the body
 * streams in, with the stored files and every other live reservation counted in full, so the service's folder never
 * holds more than its quota; at most `perService` uploads run at once per service. The uploading instance renews
 * its reservations; after a crash they lapse by themselves.
 */
export class UploadReservations {
  constructor(
    private readonly db: Database,
    readonly leaseMs = 60_000,
  ) {}

  async reserve(service: ServiceRow, bytes: number, quota: number, perService: number): Promise<string> {
    const id = randomId('upl_', 12);
    await this.db.transaction(async (client) => {
      await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [service.id]);
      await client.query('DELETE FROM upload_reservations WHERE service_id = $1 AND expires_at < now()', [service.id]);
      const {
        rows: [held],
      } = await client.query(
        `SELECT (SELECT count(*) FROM upload_reservations WHERE service_id = $1)::int AS uploads,
                (SELECT coalesce(sum(bytes), 0) FROM upload_reservations WHERE service_id = $1)::float8
              + (SELECT coalesce(sum(size_bytes), 0) FROM service_files WHERE service_id = $1)::float8 AS used`,
        [service.id],
      );
      if (held.uploads >= perService) {
        throw new ApiError(
          429,
          'too_many_uploads',
          `${held.uploads} uploads to this service are already in progress (${perService} at most at once). Wait for one to finish, then send this one again.`,
          { retryable: true, retryAfterSeconds: 5 },
        );
      }
      if (held.used + bytes > quota) throw overQuota(service, quota - held.used);
      await client.query(
        `INSERT INTO upload_reservations (id, service_id, bytes, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))`,
        [id, service.id, bytes, this.leaseMs / 1000],
      );
    });
    return id;
  }

  async renew(id: string): Promise<void> {
    await this.db.query('UPDATE upload_reservations SET expires_at = now() + make_interval(secs => $2) WHERE id = $1', [
      id,
      this.leaseMs / 1000,
    ]);
  }

  async release(id: string): Promise<void> {
    await this.db.query('DELETE FROM upload_reservations WHERE id = $1', [id]);
  }
}

export function overQuota(service: ServiceRow, room: number): ApiError {
  return new ApiError(
    413,
    'storage_quota_exceeded',
    `This upload does not fit in the service's storage (${service.limits.storage_mb} MB bought, ${Math.max(0, Math.floor((room / MB) * 100) / 100)} MB free, counting uploads in progress). Nothing was kept. Delete files (also a file you want to replace) or upload a smaller one.`,
  );
}
