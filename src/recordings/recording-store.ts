import { randomId } from '../ids/index.js';
import type { Database } from '../store/index.js';

/** A title the stream announced while a show recorded. */
export interface PlayedTitle {
  title: string;
  artist: string | null;
  started_at: string;
}

/** An archive item as owners and the feed see it. */
export interface Recording {
  id: string;
  service_id: string;
  status: 'recording' | 'complete';
  file_name: string;
  content_type: string;
  started_at: Date;
  ended_at: Date | null;
  duration_seconds: number | null;
  size_bytes: number;
  titles: PlayedTitle[];
  sessions: number;
  stop_reason: string | null;
  /** Kept until then past the service's end (a retention bought); null: it ends with its service. */
  kept_until: Date | null;
}

/** Whether a service records, and whether its feed and finished items are public. */
export interface RecordingSetting {
  enabled: boolean;
  feed_public: boolean;
}

/** A row of `recordings`: a recording but for its status, which is read from its end. */
type RecordingRow = Omit<Recording, 'status'> & Record<string, unknown>;

const COLUMNS = `id, service_id, file_name, content_type, started_at, ended_at, duration_seconds::float8 AS duration_seconds,
  size_bytes::float8 AS size_bytes, titles, sessions, stop_reason, kept_until`;

const recordingOf = (row: RecordingRow): Recording => ({
  ...row,
  status: row.ended_at ? 'complete' : 'recording',
});

/** The order's `recording` parameter, unless the owner set it since (PUT /services/{id}/recording). */
export const SETTING_SQL = `coalesce(rs.enabled, (s.limits->>'recording')::boolean, false)`;

/** Recordings and recording settings in PostgreSQL. */
export class RecordingStore {
  constructor(private readonly db: Database) {}

  async setting(serviceId: string, limits: Record<string, unknown>): Promise<RecordingSetting> {
    const [row] = await this.db.query<RecordingSetting & Record<string, unknown>>(
      'SELECT enabled, feed_public FROM recording_settings WHERE service_id = $1',
      [serviceId],
    );
    return row ?? { enabled: limits.recording === true, feed_public: true };
  }

  async setSetting(serviceId: string, setting: RecordingSetting): Promise<RecordingSetting> {
    const [row] = await this.db.query<RecordingSetting & Record<string, unknown>>(
      `INSERT INTO recording_settings (service_id, enabled, feed_public) VALUES ($1, $2, $3)
       ON CONFLICT (service_id) DO UPDATE SET enabled = $2, feed_public = $3, updated_at = now()
       RETURNING enabled, feed_public`,
      [serviceId, setting.enabled, setting.feed_public],
    );
    return row;
  }

  async list(serviceId: string, onlyComplete = false): Promise<Recording[]> {
    const rows = await this.db.query<RecordingRow>(
      `SELECT ${COLUMNS} FROM recordings WHERE service_id = $1 ${onlyComplete ? 'AND ended_at IS NOT NULL' : ''}
       ORDER BY started_at DESC`,
      [serviceId],
    );
    return rows.map(recordingOf);
  }

  async get(serviceId: string, id: string): Promise<Recording | undefined> {
    const [row] = await this.db.query<RecordingRow>(
      `SELECT ${COLUMNS} FROM recordings WHERE service_id = $1 AND id = $2`,
      [serviceId, id],
    );
    return row && recordingOf(row);
  }

  async usedBytes(serviceId: string): Promise<number> {
    const [{ used }] = await this.db.query<{ used: number }>(
      'SELECT coalesce(sum(size_bytes), 0)::float8 AS used FROM recordings WHERE service_id = $1',
      [serviceId],
    );
    return used;
  }

  /** The bytes a service's recordings take, and how many there are. */
  async footprint(serviceId: string): Promise<{ usedBytes: number; count: number }> {
    const [row] = await this.db.query<{ used: number; count: number }>(
      'SELECT coalesce(sum(size_bytes), 0)::float8 AS used, count(*)::int AS count FROM recordings WHERE service_id = $1',
      [serviceId],
    );
    return { usedBytes: row.used, count: row.count };
  }

  /** Removes the row; the caller removes the file (a row never names a file that is gone). */
  async remove(serviceId: string, id: string): Promise<Recording | undefined> {
    const [row] = await this.db.query<RecordingRow>(
      `DELETE FROM recordings WHERE service_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [serviceId, id],
    );
    return row && recordingOf(row);
  }

  /** The show open for a service: its row, or a new one (the unique index keeps it one). */
  async openShow(serviceId: string, hostId: string, contentType: string, extension: string): Promise<Recording> {
    const id = randomId('rec_', 16);
    const [row] = await this.db.query<RecordingRow>(
      `INSERT INTO recordings (id, service_id, host_id, file_name, content_type) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (service_id) WHERE ended_at IS NULL
       DO UPDATE SET paused_at = NULL, host_id = $3,
         sessions = recordings.sessions
           + CASE WHEN recordings.paused_at IS NULL AND recordings.host_id = $3 THEN 0 ELSE 1 END
       RETURNING ${COLUMNS}`,
      [id, serviceId, hostId, `.recording-${id}.${extension}`, contentType],
    );
    return recordingOf(row);
  }

  /** The capture on `hostId` ended (not one another host took over since). */
  async paused(id: string, hostId: string, sizeBytes: number): Promise<void> {
    await this.db.query(
      'UPDATE recordings SET paused_at = now(), size_bytes = $3 WHERE id = $1 AND host_id = $2 AND ended_at IS NULL',
      [id, hostId, sizeBytes],
    );
  }

  /**
   * Shows being recorded on a host found down, or of a service moved off the host that recorded it: nobody pauses
   * them there, so they are paused now. A source back within the gap (on the new host) continues the show.
   */
  async pauseLost(): Promise<number> {
    const rows = await this.db.query(
      `UPDATE recordings r SET paused_at = now() FROM services s
       WHERE s.id = r.service_id AND r.ended_at IS NULL AND r.paused_at IS NULL
         AND (s.host_id IS DISTINCT FROM r.host_id
              OR EXISTS (SELECT 1 FROM streaming_hosts h WHERE h.id = r.host_id AND h.state = 'down'))
       RETURNING r.id`,
    );
    return rows.length;
  }

  /** Shows paused longer than the gap that keeps one show (on any host: the one that recorded may be gone). */
  async overShows(gapSeconds: number): Promise<Recording[]> {
    const rows = await this.db.query<RecordingRow>(
      `SELECT ${COLUMNS} FROM recordings WHERE ended_at IS NULL AND paused_at IS NOT NULL
       AND paused_at < now() - make_interval(secs => $1::int)`,
      [gapSeconds],
    );
    return rows.map(recordingOf);
  }

  async noteStop(id: string, reason: string): Promise<void> {
    await this.db.query('UPDATE recordings SET stop_reason = $2 WHERE id = $1', [id, reason]);
  }

  /**
   * Recordings of services over for good (stopped, failed, or expired past the grace an extension has), unless kept
   * longer (kept_until, bought as retention) or a retention of the service is being paid right now.
   */
  async ofEndedServices(graceHours: number): Promise<Pick<Recording, 'id' | 'service_id' | 'file_name'>[]> {
    return this.db.query(
      `SELECT r.id, r.service_id, r.file_name FROM recordings r JOIN services s ON s.id = r.service_id
       WHERE (s.stopped_at IS NOT NULL OR s.status = 'failed'
              OR (s.expires_at IS NOT NULL AND s.expires_at < now() - make_interval(hours => $1::int)))
         AND (r.kept_until IS NULL OR r.kept_until < now())
         AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.retention_of = r.service_id
                         AND o.state IN ('settling', 'provisioning'))`,
      [graceHours],
    );
  }
}
