import { ApiError } from '../errors/index.js';
import type { Client, Database } from '../store/index.js';
import { listenerCapOf, type StreamingEndpoint } from './service-records.js';

/** What one Icecast carries: one source per service, and every listener place its services were sold. */
export interface StreamLoad {
  sources: number;
  listeners: number;
}

/**
 * A stream is sold only while it fits on its Icecast: Icecast refuses sources and listeners beyond its configured
 * limits, so a stream sold past them could not connect, or its buyer's listeners could not. In use = the services
 * on this Icecast that may still stream, plus what paid orders not provisioned yet will add (the caller's `pending`).
 */
export class StreamCapacity {
  constructor(private readonly db: Database, private readonly streaming: StreamingEndpoint, readonly limits: StreamLoad) {}

  /** Admissions to this Icecast wait for each other until the caller's transaction ends. */
  async lock(client: Client): Promise<void> {
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended('stream capacity ' || $1, 0))", [this.streaming.publicUrl()]);
  }

  /** Throws 503 capacity_exhausted unless `demand` fits beside the services on this Icecast and `pending`. */
  async admit(demand: StreamLoad, pending: StreamLoad, client?: Client): Promise<void> {
    const sql = `SELECT limits FROM services WHERE icecast_url = $1 AND status IN ('pending', 'provisioning', 'active', 'suspended')
                 AND (expires_at IS NULL OR expires_at > now())`;
    const params = [this.streaming.publicUrl()];
    const rows = (client ? (await client.query(sql, params)).rows : await this.db.query(sql, params)) as Array<{ limits: Record<string, unknown> }>;
    const sources = rows.length + pending.sources;
    const listeners = rows.reduce((sum, r) => sum + listenerCapOf(r.limits), 0) + pending.listeners;
    if (demand.sources > 0 && sources + demand.sources > this.limits.sources) {
      throw exhausted(`All ${this.limits.sources} stream slots of this deployment are taken`);
    }
    if (demand.listeners > 0 && listeners + demand.listeners > this.limits.listeners) {
      const free = Math.max(0, this.limits.listeners - listeners);
      throw exhausted(`This deployment has ${free} of its ${this.limits.listeners} listener places free, fewer than the ${demand.listeners} asked`);
    }
  }
}

function exhausted(why: string): ApiError {
  return new ApiError(503, 'capacity_exhausted',
    `${why}. Nothing was charged. Retry later (places come free as streams expire), or ask for fewer listeners.`,
    { retryable: true, headers: { 'Retry-After': '300' } });
}
