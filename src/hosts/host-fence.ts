import type { Logger } from '../log/index.js';
import type { IcecastAdmin } from '../provisioning/index.js';
import type { Database } from '../store/index.js';

/**
 * Drop-on-return: what this host's Icecast still carries for services that are no longer on this host (moved while
 * it was counted down, e.g. it lost the database for longer than HOST_DOWN_AFTER_SECONDS) is cut: the source, and
 * with it the listeners. Its callbacks already refuse those services (IcecastDecider.servesHere), so they do not come
 * back; the life-cycle worker, which runs only this host's services, stops their AutoDJ and relay processes.
 * Returns the mounts cut. Mounts of no known service are left to Icecast.
 */
export async function dropServicesMovedAway(
  db: Database,
  hostId: string,
  admin: IcecastAdmin | undefined,
  log: Logger,
): Promise<string[]> {
  const mounts = admin && (await admin.listMounts().catch(() => undefined));
  if (!admin || !mounts?.length) return [];
  const elsewhere = await db.query<{ id: string; mount: string }>(
    'SELECT id, mount FROM services WHERE mount = ANY($1::text[]) AND host_id IS DISTINCT FROM $2',
    [mounts.map((m) => m.mount), hostId],
  );
  for (const service of elsewhere) {
    await admin.killSource(service.mount).catch(() => false);
    for (const client of await admin.listClients(service.mount).catch(() => []))
      await admin.killClient(service.mount, client.id).catch(() => false);
    log.warn({ service_id: service.id, mount: service.mount }, 'cut a mount of a service that moved to another host');
  }
  return elsewhere.map((s) => s.mount);
}
