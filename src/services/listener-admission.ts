import type { Client, Database } from '../store/index.js';
import { clientNetwork, ListenerSessions, type NewListenerSession } from './listener-sessions.js';
import { recordServiceEvent } from './service-events.js';
import { listenerCapOf, type ServiceRow } from './service-records.js';

export type Admission =
  | { accept: true; service: ServiceRow }
  | { accept: false; message: string; service?: ServiceRow };

/**
 * Takes one of the service's bought listener places for `clientId` (an Icecast client id, or `hls:` and an HLS
 * session token), or refuses when all are taken. Icecast and HLS listeners share the places (the listeners table).
 * An admitted listener's session (the owner's statistics) opens in the same transaction.
 */
export async function admitListener(
  db: Database,
  where: { mount: string } | { serviceId: string },
  clientId: string,
  ip: string,
  session: Pick<NewListenerSession, 'userAgent' | 'protocol'>,
  /** The streaming host asking: a service placed on another host (it moved) is not admitted here. */
  hostId?: string,
): Promise<Admission> {
  return db.transaction(async (client) => {
    const service = await lockActiveService(client, where, hostId);
    if (!service) return { accept: false, message: 'no active stream on this mount' };
    const max = listenerCapOf(service.limits);
    const {
      rows: [{ count }],
    } = await client.query('SELECT count(*)::int AS count FROM listeners WHERE service_id = $1 AND client_id <> $2', [
      service.id,
      clientId,
    ]);
    if (count >= max) return { accept: false, service, message: await refuseOverCap(client, service, max) };
    await client.query('INSERT INTO listeners (service_id, client_id, ip) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
      service.id,
      clientId,
      clientNetwork(ip),
    ]);
    await ListenerSessions.open(client, service.id, { clientId, ip, ...session });
    return { accept: true, service };
  });
}

async function lockActiveService(
  client: Client,
  where: { mount: string } | { serviceId: string },
  hostId: string | undefined,
): Promise<ServiceRow | undefined> {
  const [column, value] = 'mount' in where ? ['mount', where.mount] : ['id', where.serviceId];
  const onHost = hostId === undefined ? '' : 'AND host_id = $2';
  const {
    rows: [service],
  } = await client.query(
    `SELECT * FROM services WHERE ${column} = $1 AND status = 'active' AND (expires_at IS NULL OR expires_at > now())
     ${onHost} FOR UPDATE`,
    hostId === undefined ? [value] : [value, hostId],
  );
  return service as ServiceRow | undefined;
}

/** The refusal's message; the owner sees refusals in GET /services/{id}/usage (one event a minute, however many). */
async function refuseOverCap(client: Client, service: ServiceRow, max: number): Promise<string> {
  await recordCapRefusal(client, service.id, max);
  return capRefusalMessage(max);
}

const placesOf = (max: number) => `${max} listener${max === 1 ? '' : 's'}`;

/** What a listener refused over the cap is told (Icecast's log, the HLS error document). */
export function capRefusalMessage(max: number): string {
  return (
    `Listener limit reached: this stream was bought for ${placesOf(max)} and all are connected; ` +
    'try again when one leaves'
  );
}

/** Records a refusal over the cap as a service event, at most one a minute per service. */
export async function recordCapRefusal(client: Client, serviceId: string, max: number): Promise<void> {
  await recordServiceEvent(
    client,
    {
      serviceId,
      kind: 'enforce',
      code: 'listener_limit_reached',
      reason:
        `A listener was refused: the stream was bought for ${placesOf(max)} and all are connected. ` +
        'An upgrade with more listeners raises the limit.',
    },
    { oncePerMinute: true },
  );
}

/**
 * Frees the Icecast places of every service on a host whose Icecast and proxy start afresh (serve started, or started
 * again after a crash): no listener of the ones before is connected to the new ones, and the lines that would have
 * told of their ends went with them (a listener that left just before a stop, or every one at a crash). Left alone,
 * such a place would count against its stream until the life-cycle worker's reconciliation, more than a minute later.
 * HLS sessions end by themselves.
 */
export async function releaseHostIcecastPlaces(db: Database, hostId: string): Promise<number> {
  const released = await db.query(
    `DELETE FROM listeners l USING services s
     WHERE l.service_id = s.id AND s.host_id = $1 AND l.client_id NOT LIKE 'hls:%' RETURNING l.client_id`,
    [hostId],
  );
  return released.length;
}
