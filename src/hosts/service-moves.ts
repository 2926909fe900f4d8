import { recordEvent } from '../events/index.js';
import {
  liveHoldingSql,
  recordServiceEvent,
  streamAddresses,
  type ServiceRow,
  type StreamLoad,
} from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import { lockPlacement } from './placement.js';

/** The statuses that hold a place on a host (as in services/live-holdings.ts): what a lost host's services may be. */
export const HOLDS_A_PLACE = "status IN ('pending', 'provisioning', 'active', 'suspended')";

/** A service of a lost host, as the monitor found it. */
export interface Stranded {
  id: string;
  fromHost: string;
  hostEpoch: number;
  /** Listener places it was sold: what it takes on the host it moves to, beside its one source. */
  listenerPlaces: number;
}

/** A live host that may take services, with what it carries and what is in use on it. */
export interface Destination {
  id: string;
  publicUrl: string;
  maxSources: number | null;
  maxListeners: number | null;
  sources: number;
  listeners: number;
}

export interface MoveOutcome {
  serviceId: string;
  fromHost: string;
  toHost: string;
  hostEpoch: number;
  creditedSeconds: number;
}

/** Whether a service of `listenerPlaces` fits on `host` beside what it carries (a host without limits takes any). */
export function fits(host: Destination, listenerPlaces: number): boolean {
  if (host.maxSources !== null && host.sources + 1 > host.maxSources) return false;
  return host.maxListeners === null || host.listeners + listenerPlaces <= host.maxListeners;
}

/**
 * What paid orders not provisioned yet will add, by the host each was placed on (null: claimed before orders recorded
 * their host, so it may land on any): placement counts them, and so must a move (orders/in-flight-load.ts).
 */
export type InFlightLoad = (client: Client) => Promise<Map<string | null, StreamLoad>>;

/** The in-flight orders' load on one host: those placed on it, and those placed nowhere yet (on the safe side). */
function spokenFor(inFlight: Map<string | null, StreamLoad>, hostId: string): StreamLoad {
  const placed = inFlight.get(hostId);
  const unplaced = inFlight.get(null);
  return {
    sources: (placed?.sources ?? 0) + (unplaced?.sources ?? 0),
    listeners: (placed?.listeners ?? 0) + (unplaced?.listeners ?? 0),
  };
}

/**
 * What is in use on a host now: its live services (one source each) and the listener places they were sold, plus
 * what the paid orders placed on it and not provisioned yet will add.
 */
export async function hostLoad(
  client: Client,
  hostId: string,
  inFlight?: Map<string | null, StreamLoad>,
): Promise<StreamLoad> {
  const {
    rows: [held],
  } = await client.query(`SELECT live_services, listener_places FROM (${liveHoldingSql('host')}) held`, [hostId]);
  const spoken = inFlight ? spokenFor(inFlight, hostId) : { sources: 0, listeners: 0 };
  return {
    sources: Number(held.live_services) + spoken.sources,
    listeners: Number(held.listener_places) + spoken.listeners,
  };
}

/**
 * Moves one service of a lost host to `to`, in one transaction, under the placement lock sales take: the service
 * keeps its mount and source credentials, gets the next host epoch (fencing: callbacks of the old host refuse it from
 * now on), and its expiry is credited with the time it was unavailable (from the lost host's last heartbeat to now).
 * The new host's Icecast counts the mount's bytes from zero: the transfer used on the old host is carried in
 * transfer_offset_bytes (negative by as much), so the transfer still bought is what it was; a renewal's late counts
 * (TransferRenewals) are the lost host's, and no longer looked for.
 * The move is recorded and the owner gets service.moved; both hosts' reconcilers hear of it from the trigger on
 * services (migration 050).
 * Room on `to` is counted under the lock with the orders in flight on it: a move never takes a place a paid order
 * was promised. Undefined when it did not happen: the old host beat again, the service changed meanwhile, or `to`
 * has no room now.
 */
export async function moveService(
  client: Client,
  service: Stranded,
  to: Destination,
  inFlight?: InFlightLoad,
): Promise<MoveOutcome | undefined> {
  // A beat of the lost host waits for this row lock, and once it has returned the host to 'up' nothing moves.
  const {
    rows: [lost],
  } = await client.query(
    "SELECT heartbeat_at, down_since FROM streaming_hosts WHERE id = $1 AND state = 'down' FOR UPDATE",
    [service.fromHost],
  );
  if (!lost) return undefined;
  await lockPlacement(client);
  const {
    rows: [target],
  } = await client.query("SELECT public_url FROM streaming_hosts WHERE id = $1 AND state = 'up'", [to.id]);
  if (!target) return undefined;
  const load = await hostLoad(client, to.id, await inFlight?.(client));
  if (!fits({ ...to, ...load }, service.listenerPlaces)) return undefined;
  const {
    rows: [moved],
  } = await client.query(
    `WITH lost AS (SELECT GREATEST(0, ceil(extract(epoch FROM now() - $4::timestamptz)))::int AS seconds)
     UPDATE services s SET host_id = $2, host_epoch = s.host_epoch + 1, updated_at = now(),
            expires_at = s.expires_at + make_interval(secs => lost.seconds),
            transfer_offset_bytes = s.transfer_offset_bytes - coalesce((s.usage->>'bytes_sent')::bigint, 0),
            transfer_renewed_at = NULL
       FROM lost
      WHERE s.id = $1 AND s.host_id = $3 AND s.host_epoch = $5 AND s.${HOLDS_A_PLACE}
        AND (s.expires_at IS NULL OR s.expires_at > now())
     RETURNING s.*, lost.seconds AS unavailable_seconds,
               (SELECT expires_at FROM services WHERE id = $1) AS expires_before`,
    [service.id, to.id, service.fromHost, lost.heartbeat_at, service.hostEpoch],
  );
  if (!moved) return undefined;
  const row = moved as ServiceRow & { host_epoch: number; unavailable_seconds: number; expires_before: Date | null };
  const creditedSeconds = row.expires_at ? row.unavailable_seconds : 0;
  await recordMove(client, row, { from: service.fromHost, to: to.id, lost, creditedSeconds });
  await recordEvent(client, {
    type: 'service.moved',
    serviceId: row.id,
    data: {
      ...streamAddresses(new URL(target.public_url as string), row),
      expires_at: row.expires_at?.toISOString() ?? null,
      credited_seconds: creditedSeconds,
      reason:
        `The streaming host of this service stopped answering; the service now streams on another host. ` +
        `Reconnect your encoder to the new broadcast_url (same credentials); listeners use the new stream_url.` +
        (creditedSeconds ? ` The ${creditedSeconds} s it was unavailable were added to its expiry.` : ''),
    },
  });
  return { serviceId: row.id, fromHost: service.fromHost, toHost: to.id, hostEpoch: row.host_epoch, creditedSeconds };
}

/** The audit trail of the move (service_moves, service_events); the lost host's listeners are gone with it. */
async function recordMove(
  client: Client,
  service: ServiceRow & { host_epoch: number; expires_before: Date | null },
  move: { from: string; to: string; lost: Record<string, unknown>; creditedSeconds: number },
): Promise<void> {
  await client.query(
    `INSERT INTO service_moves (service_id, from_host, to_host, host_epoch, unavailable_from, down_since,
                                credited_seconds, expires_before, expires_after)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      service.id,
      move.from,
      move.to,
      service.host_epoch,
      move.lost.heartbeat_at,
      move.lost.down_since,
      move.creditedSeconds,
      service.expires_before,
      service.expires_at,
    ],
  );
  await recordServiceEvent(client, {
    serviceId: service.id,
    kind: 'move',
    code: 'host_lost',
    reason:
      `Moved to another streaming host after its host stopped answering; ` +
      `${move.creditedSeconds} s credited to the expiry.`,
  });
  // Listener places held on the lost host are free: those listeners were cut with it and reconnect to the new host.
  await client.query("DELETE FROM listeners WHERE service_id = $1 AND client_id NOT LIKE 'hls:%'", [service.id]);
}

/**
 * Services sold before hosts had ids (a host per address then) join the host now registered at that address. With
 * moveService, the only writes of a service's host.
 */
export async function adoptServicesAt(db: Database, hostId: string, publicUrl: string): Promise<void> {
  await db.query("UPDATE services SET host_id = $1 WHERE host_id = 'url:' || $2::text AND icecast_url = $2", [
    hostId,
    publicUrl,
  ]);
}
