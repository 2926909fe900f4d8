import { liveHoldingSql } from '../services/index.js';
import type { Database } from '../store/index.js';

/** One streaming host as the operator sees it (hosts list, /health/details, metrics). */
export interface HostReport {
  id: string;
  public_url: string;
  state: 'up' | 'draining' | 'down';
  /** Beating within HOST_DOWN_AFTER_SECONDS: placements may count on it (when up). */
  live: boolean;
  capacity: { sources: number | null; listeners: number | null; bandwidth_kbps: number | null };
  /** Live services (one source each) and the listener places they were sold. */
  in_use: { sources: number; listeners: number };
  heartbeat_age_seconds: number | null;
}

const REPORT = `SELECT h.id, h.public_url, h.state, h.max_sources, h.max_listeners, h.bandwidth_kbps,
    h.heartbeat_at > now() - make_interval(secs => $1) AS live,
    extract(epoch FROM now() - h.heartbeat_at)::float8 AS heartbeat_age, held.live_services, held.listener_places
  FROM streaming_hosts h CROSS JOIN LATERAL (${liveHoldingSql('host', 'h.id')}) held
  ORDER BY h.started_at NULLS FIRST, h.id`;

/** Every registered host with what it carries, what is in use on it and how old its heartbeat is. */
export async function hostPoolReport(db: Database, downAfterSeconds: number): Promise<HostReport[]> {
  const rows = await db.query(REPORT, [downAfterSeconds]);
  const count = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return rows.map((row) => ({
    id: row.id as string,
    public_url: row.public_url as string,
    state: row.state as HostReport['state'],
    live: row.live === true,
    capacity: {
      sources: count(row.max_sources),
      listeners: count(row.max_listeners),
      bandwidth_kbps: count(row.bandwidth_kbps),
    },
    in_use: { sources: Number(row.live_services), listeners: Number(row.listener_places) },
    heartbeat_age_seconds: row.heartbeat_age === null ? null : Math.round(Number(row.heartbeat_age) * 10) / 10,
  }));
}

/** The operator's changes of a host's state; each answers what happened, or why nothing did. */
export type HostChange = { ok: true; state: string } | { ok: false; reason: string };

/** No new placements on the host; its services run to their end. A down host stays down. */
export async function drainHost(db: Database, id: string): Promise<HostChange> {
  return setState(db, id, 'up', 'draining');
}

/** The host takes new placements again. */
export async function undrainHost(db: Database, id: string): Promise<HostChange> {
  return setState(db, id, 'draining', 'up');
}

async function setState(db: Database, id: string, from: string, to: string): Promise<HostChange> {
  const [changed] = await db.query(
    'UPDATE streaming_hosts SET state = $3, updated_at = now() WHERE id = $1 AND state = $2 RETURNING state',
    [id, from, to],
  );
  if (changed) return { ok: true, state: to };
  const [host] = await db.query<{ state: string }>('SELECT state FROM streaming_hosts WHERE id = $1', [id]);
  if (!host) return { ok: false, reason: `no streaming host ${id} (hosts list shows them)` };
  if (host.state === to) return { ok: true, state: to };
  return {
    ok: false,
    reason: `host ${id} is ${host.state}; only ${from} hosts can be set ${to}`,
  };
}

/**
 * Forgets a host that holds no service that may still stream (nor a paid order placed on it). Its record goes; a
 * host process still running registers it again at its next start.
 */
export async function removeHost(db: Database, id: string): Promise<HostChange> {
  return db.transaction(async (client) => {
    const { rows: hosts } = await client.query('SELECT id FROM streaming_hosts WHERE id = $1 FOR UPDATE', [id]);
    if (!hosts.length) return { ok: false, reason: `no streaming host ${id} (hosts list shows them)` };
    const {
      rows: [held],
    } = await client.query(
      `SELECT (SELECT count(*) FROM services WHERE host_id = $1
                 AND status IN ('pending', 'provisioning', 'active', 'suspended')
                 AND (expires_at IS NULL OR expires_at > now()))::int AS services,
              (SELECT count(*) FROM orders
                WHERE host_id = $1 AND state IN ('settling', 'provisioning'))::int AS orders`,
      [id],
    );
    if (held.services || held.orders) {
      return {
        ok: false,
        reason:
          `host ${id} still holds ${held.services} live services and ${held.orders} paid orders in flight: ` +
          `drain it (hosts drain ${id}) and remove it once they have ended`,
      };
    }
    await client.query('DELETE FROM streaming_hosts WHERE id = $1', [id]);
    return { ok: true, state: 'removed' };
  });
}
