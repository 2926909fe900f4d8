import type { Logger } from '../log/index.js';

/** What can cut a mount: Icecast's admin API, the AutoDJ and relays that feed it. */
export interface MountCutter {
  admin():
    | {
        killSource(mount: string): Promise<boolean>;
        listClients(mount: string): Promise<Array<{ id: string }>>;
        killClient(mount: string, id: string): Promise<boolean>;
      }
    | undefined;
  autodj?: { stop(serviceId: string): Promise<void> };
  relays?: { stop(serviceId: string): Promise<void> };
  /** Forgets the service's admitted listeners (their places). */
  dropListeners(serviceId: string): Promise<void>;
}

/**
 * Cuts a stopped service's mount: its feeders stop, its source and listeners are disconnected. Run after the stop is
 * committed, when Icecast's URL-auth callbacks already refuse them, so none can come back. A step that fails is
 * logged: the callbacks still refuse, and the worker that computes the refund runs the cut again.
 */
export async function cutMount(
  cutter: MountCutter,
  service: { id: string; mount: string },
  log: Logger,
): Promise<void> {
  const step = async (name: string, work: () => Promise<unknown>) => {
    try {
      await work();
    } catch (err) {
      log.warn({ service_id: service.id, step: name, err }, 'stopping the mount: a step failed');
    }
  };
  await step('autodj', async () => cutter.autodj?.stop(service.id));
  await step('relay', async () => cutter.relays?.stop(service.id));
  const admin = cutter.admin();
  if (admin) {
    await step('source', () => admin.killSource(service.mount));
    await step('listeners', async () => {
      for (const client of await admin.listClients(service.mount).catch(() => []))
        await admin.killClient(service.mount, client.id);
    });
  }
  await step('listener rows', () => cutter.dropListeners(service.id));
}
