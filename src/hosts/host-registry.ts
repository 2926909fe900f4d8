import type { Database } from '../store/index.js';
import { adoptServicesAt } from './service-moves.js';

/** What a streaming host (one Icecast) says about itself when it starts. */
export interface HostRegistration {
  id: string;
  publicUrl: string;
  maxSources: number;
  maxListeners: number;
  /** Outgoing bandwidth the host may use, when the operator set one. */
  bandwidthKbps?: number;
}

/** A host as the pool sees it: `up` takes new services, `draining` keeps its own only, `down` missed its heartbeat. */
export interface HostRecord {
  id: string;
  publicUrl: string;
  state: 'up' | 'draining' | 'down';
  maxSources: number | null;
  maxListeners: number | null;
  bandwidthKbps: number | null;
  heartbeatAt: Date | null;
  startedAt: Date | null;
  downSince: Date | null;
}

/**
 * Records where a streaming host (one Icecast, by its stable id) is reached now and what it carries, and beats once.
 * Its services' stream and broadcast addresses are derived from this when read, so they follow the host when its
 * address changes. A host that was drained stays drained across restarts; one that was down is up again.
 */
export async function registerStreamingHost(db: Database, host: HostRegistration): Promise<void> {
  await db.query(
    `INSERT INTO streaming_hosts (id, public_url, max_sources, max_listeners, bandwidth_kbps, heartbeat_at, started_at)
     VALUES ($1, $2, $3, $4, $5, now(), now())
     ON CONFLICT (id) DO UPDATE SET public_url = $2, max_sources = $3, max_listeners = $4, bandwidth_kbps = $5,
       heartbeat_at = now(), started_at = now(), updated_at = now(),
       state = CASE WHEN streaming_hosts.state = 'draining' THEN 'draining' ELSE 'up' END, down_since = NULL`,
    [host.id, host.publicUrl, host.maxSources, host.maxListeners, host.bandwidthKbps ?? null],
  );
  // Services sold before hosts had ids (migration 009 gave them a host per address) join the host now at that address.
  await adoptServicesAt(db, host.id, host.publicUrl);
}

/**
 * The host is alive: placements may count on it for another HOST_DOWN_AFTER_SECONDS. A host counted down that beats
 * again (it lost the database for a while) is up again; what moved off it meanwhile stays where it went.
 */
export async function beatStreamingHost(db: Database, hostId: string): Promise<void> {
  await db.query(
    `UPDATE streaming_hosts SET heartbeat_at = now(),
       down_since = CASE WHEN state = 'down' THEN NULL ELSE down_since END,
       state = CASE WHEN state = 'down' THEN 'up' ELSE state END
     WHERE id = $1`,
    [hostId],
  );
}

/** Every registered host, oldest first. */
export async function listStreamingHosts(db: Database): Promise<HostRecord[]> {
  const rows = (await db.query('SELECT * FROM streaming_hosts ORDER BY started_at NULLS FIRST, id')) as Array<
    Record<string, unknown>
  >;
  return rows.map(hostRecord);
}

function hostRecord(row: Record<string, unknown>): HostRecord {
  const count = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: row.id as string,
    publicUrl: row.public_url as string,
    state: row.state as HostRecord['state'],
    maxSources: count(row.max_sources),
    maxListeners: count(row.max_listeners),
    bandwidthKbps: count(row.bandwidth_kbps),
    heartbeatAt: (row.heartbeat_at as Date | null) ?? null,
    startedAt: (row.started_at as Date | null) ?? null,
    downSince: (row.down_since as Date | null) ?? null,
  };
}
