import type { Logger } from '../log/index.js';
import type { Client, Database } from '../store/index.js';
import { recordEvent } from './event-log.js';

export type SourceEventType = 'source.connected' | 'source.disconnected';

interface Held {
  service_id: string;
  held_type: SourceEventType;
  last_type: SourceEventType | null;
}

interface Gate {
  last_type: SourceEventType | null;
  window_count: number;
  window_over: boolean;
}

/**
 * source.connected / source.disconnected, rate-limited per service. Reconnecting a source costs its owner nothing, so
 * unlimited it would fill the webhook outbox and wake readers at will. A service records at most two source events
 * (one connect/disconnect pair) per window of `windowSeconds`; a change beyond that is held, only the latest state,
 * and recorded when the window ends if it differs from the last state recorded. A repeat of the last recorded state
 * is not recorded again. The gate is a row per service (source_event_gates), so it holds across instances.
 */
export class SourceEventGate {
  private timer?: NodeJS.Timeout;
  private flushing?: Promise<unknown>;

  constructor(
    private readonly db: Database,
    private readonly windowSeconds: number,
    private readonly log?: Logger,
  ) {}

  /** The source on this Icecast mount connected or disconnected. */
  async record(mount: string, type: SourceEventType): Promise<void> {
    await this.db.transaction(async (client) => {
      const {
        rows: [service],
      } = await client.query<{ id: string }>('SELECT id FROM services WHERE mount = $1', [mount]);
      if (!service) return;
      await client.query('INSERT INTO source_event_gates (service_id) VALUES ($1) ON CONFLICT DO NOTHING', [
        service.id,
      ]);
      const {
        rows: [gate],
      } = await client.query<Gate>(
        `SELECT last_type, window_count,
                window_start IS NULL OR now() >= window_start + make_interval(secs => $2) AS window_over
         FROM source_event_gates WHERE service_id = $1 FOR UPDATE`,
        [service.id, this.windowSeconds],
      );
      if (gate.last_type === type) {
        await client.query('UPDATE source_event_gates SET held_type = NULL WHERE service_id = $1', [service.id]);
      } else if (gate.window_over || gate.window_count < 2) {
        await this.emit(client, service.id, type, gate.window_over);
      } else {
        await client.query('UPDATE source_event_gates SET held_type = $2 WHERE service_id = $1', [service.id, type]);
      }
    });
  }

  /** Records the held states whose window has ended; returns how many. */
  async flush(): Promise<number> {
    // Most flushes find nothing held: one look, before a transaction that locks what it finds.
    const [held] = await this.db.query<{ any: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM source_event_gates WHERE held_type IS NOT NULL) AS any',
    );
    if (!held?.any) return 0;
    return this.db.transaction(async (client) => {
      const { rows } = await client.query<Held>(
        `SELECT service_id, held_type, last_type FROM source_event_gates
         WHERE held_type IS NOT NULL AND now() >= window_start + make_interval(secs => $1)
         FOR UPDATE SKIP LOCKED`,
        [this.windowSeconds],
      );
      let recorded = 0;
      for (const row of rows) {
        if (row.held_type === row.last_type) {
          await client.query('UPDATE source_event_gates SET held_type = NULL WHERE service_id = $1', [row.service_id]);
        } else {
          await this.emit(client, row.service_id, row.held_type, true);
          recorded++;
        }
      }
      return recorded;
    });
  }

  private async emit(client: Client, serviceId: string, type: SourceEventType, newWindow: boolean): Promise<void> {
    await recordEvent(client, { type, serviceId });
    await client.query(
      `UPDATE source_event_gates SET last_type = $2, held_type = NULL,
         window_start = CASE WHEN $3 THEN now() ELSE window_start END,
         window_count = CASE WHEN $3 THEN 1 ELSE window_count + 1 END
       WHERE service_id = $1`,
      [serviceId, type, newWindow],
    );
  }

  /** Flushes held states every second (or every window, when shorter) until stop(). */
  start(): void {
    const every = Math.min(1000, this.windowSeconds * 1000);
    this.timer = setInterval(() => {
      this.flushing ??= this.flush()
        .catch((err) => this.log?.warn({ err }, 'could not record held source events'))
        .finally(() => {
          this.flushing = undefined;
        });
    }, every);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flushing;
  }
}
