import { ApiError } from '../errors/index.js';
import type { Client, Database } from '../store/index.js';
import { liveHoldingSql } from './live-holdings.js';
import type { StreamingEndpoint } from './service-records.js';

/** What one Icecast carries: one source per service, and every listener place its services were sold. */
export interface StreamLoad {
  sources: number;
  listeners: number;
}

/**
 * A stream is sold only while it fits on its Icecast: Icecast refuses sources and listeners beyond its configured
 * limits, so a stream sold past them could not connect, or its buyer's listeners could not. What counts: the
 * services on this Icecast that may still stream, plus what paid orders not provisioned yet will add (the caller's).
 */
export class StreamCapacity {
  constructor(
    private readonly db: Database,
    private readonly streaming: StreamingEndpoint,
    readonly limits: StreamLoad,
  ) {}

  /** Admissions to this Icecast wait for each other until the caller's transaction ends. */
  async lock(client: Client): Promise<void> {
    await lockHostCapacity(client, this.streaming.hostId());
  }

  /** The services on this Icecast that may still stream: one source each, and the listener places they were sold. */
  async inUse(client?: Client): Promise<StreamLoad> {
    return (await this.inUseAlong<never>(undefined, client)).load;
  }

  /**
   * inUse, and the rows of `alongside` (a query without parameters) read in the same statement, so from the same
   * snapshot and in one round trip.
   */
  async inUseAlong<T>(alongside: string | undefined, client?: Client): Promise<{ load: StreamLoad; rows: T[] }> {
    const rows = alongside ? `, (SELECT coalesce(json_agg(a), '[]') FROM (${alongside}) a) AS rows` : '';
    const sql = `SELECT held.live_services AS sources, held.listener_places AS listeners${rows}
                 FROM (${liveHoldingSql('host')}) held`;
    const params = [this.streaming.hostId()];
    const [load] = (client ? (await client.query(sql, params)).rows : await this.db.query(sql, params)) as Array<{
      sources: number;
      listeners: string;
      rows?: T[];
    }>;
    return { load: { sources: load.sources, listeners: Number(load.listeners) }, rows: load.rows ?? [] };
  }

  /** Throws 503 capacity_exhausted unless `demand` fits beside `load` (what is in use and spoken for). */
  admit(demand: StreamLoad, load: StreamLoad): void {
    if (demand.sources > 0 && load.sources + demand.sources > this.limits.sources) {
      throw exhausted(`All ${this.limits.sources} stream slots of this deployment are taken`);
    }
    if (demand.listeners > 0 && load.listeners + demand.listeners > this.limits.listeners) {
      const free = Math.max(0, this.limits.listeners - load.listeners);
      throw exhausted(
        `This deployment has ${free} of its ${this.limits.listeners} listener places free, fewer than the ${demand.listeners} asked`,
      );
    }
  }
}

/** Admissions to a host (sales, and services moved onto it) wait for each other until the transaction ends. */
export async function lockHostCapacity(client: Client, hostId: string): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('stream capacity ' || $1, 0))", [hostId]);
}

function exhausted(why: string): ApiError {
  return new ApiError(
    503,
    'capacity_exhausted',
    `${why}. Nothing was charged. Retry later (places come free as streams expire), or ask for fewer listeners.`,
    { retryable: true, retryAfterSeconds: 300 },
  );
}
