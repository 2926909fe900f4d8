import type { Client, Database } from '../store/index.js';

/** A finished recording as a retention order fixes it: which one, and the bytes it keeps. */
export interface RetainedRecording {
  id: string;
  size_bytes: number;
}

/** A recording with the time it is kept until past its service's end (null: it ends with its service). */
export interface RecordingKept {
  recording_id: string;
  kept_until: string | null;
}

/** The service's finished recordings (a show still recording is not kept: its size is not known yet). */
export async function finishedRecordings(db: Database, serviceId: string): Promise<RetainedRecording[]> {
  return db.query<RetainedRecording & Record<string, unknown>>(
    `SELECT id, size_bytes::float8 AS size_bytes FROM recordings WHERE service_id = $1 AND ended_at IS NOT NULL
     ORDER BY started_at, id`,
    [serviceId],
  );
}

/** Which of these recordings of the service are gone (deleted, or not finished), read in the caller's transaction. */
export async function missingRecordings(client: Client, serviceId: string, ids: string[]): Promise<string[]> {
  const { rows } = await client.query(
    `SELECT id FROM recordings WHERE service_id = $1 AND id = ANY($2::text[]) AND ended_at IS NOT NULL`,
    [serviceId, ids],
  );
  const present = new Set(rows.map((r) => r.id as string));
  return ids.filter((id) => !present.has(id));
}

/**
 * Keeps the recordings `days` more days: from the later of the service's end (its stop, else its expiry) and now, or
 * from the time one is already kept until when that is later (buying again adds days). The database's clock decides,
 * as the deletion pass reads it.
 */
export async function keepRecordings(
  client: Client,
  serviceId: string,
  ids: string[],
  days: number,
): Promise<RecordingKept[]> {
  const { rows } = await client.query(
    `WITH base AS (
       SELECT greatest(coalesce(s.stopped_at, s.expires_at, now()), now()) AS at FROM services s WHERE s.id = $1)
     UPDATE recordings r SET kept_until = greatest(coalesce(r.kept_until, base.at), base.at) + make_interval(days => $3)
     FROM base WHERE r.service_id = $1 AND r.id = ANY($2::text[])
     RETURNING r.id, r.kept_until`,
    [serviceId, ids, days],
  );
  return rows.map((r) => ({ recording_id: r.id as string, kept_until: (r.kept_until as Date).toISOString() }));
}

/** When each of the service's recordings is kept until past the service's end. */
export async function keptUntil(db: Database, serviceId: string): Promise<RecordingKept[]> {
  const rows = await db.query<{ id: string; kept_until: Date | null }>(
    'SELECT id, kept_until FROM recordings WHERE service_id = $1 ORDER BY started_at, id',
    [serviceId],
  );
  return rows.map((r) => ({ recording_id: r.id, kept_until: r.kept_until?.toISOString() ?? null }));
}
