import type { Logger } from '../log/index.js';
import { songText, type ServiceRow } from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import { PeriodicTask } from '../tasks/index.js';

/**
 * The channel that wakes a streaming host's reconciler; the payload is the host id. Migration 050's trigger on
 * services sends it at commit whenever a service of the host is created, changes status, limits, expiry or host
 * (both hosts of a move), or its host epoch changes; anyone may send `NOTIFY host_services, '<host id>'` too (the
 * owner's title, below). The periodic pass covers notifications lost while the connection was down.
 */
export const HOST_SERVICES_CHANNEL = 'host_services';

/** How often a host reconciles without being woken. */
const RECONCILE_INTERVAL_MS = 5000;

/** What the reconciler drives on its host: the Icecast admin API, and the processes that feed the mounts. */
export interface HostWorkers {
  admin():
    | {
        listMounts(): Promise<Array<{ mount: string }>>;
        killSource(mount: string): Promise<boolean>;
        listClients(mount: string): Promise<Array<{ id: string }>>;
        killClient(mount: string, id: string): Promise<boolean>;
        updateMetadata(mount: string, song: string): Promise<boolean>;
      }
    | undefined;
  autodj: { sync(services: ServiceRow[]): Promise<void> };
  relays: { sync(services: ServiceRow[]): Promise<void> };
}

const LIVE_ON_HOST = `SELECT * FROM services WHERE host_id = $1 AND status IN ('active', 'suspended')`;
// What plays now on each of these services, when the owner set it (PUT now-playing, through any API instance).
const OWNER_TITLES = `SELECT service_id, title, artist FROM (
    SELECT DISTINCT ON (service_id) service_id, title, artist, source FROM now_playing
     WHERE service_id = ANY($1) ORDER BY service_id, id DESC) latest
  WHERE source = 'owner'`;

/**
 * Makes what runs on this streaming host match PostgreSQL, whatever API instance changed it: the services placed here
 * get their AutoDJ and relay (their mount limits are read by the URL-auth callbacks), and a mount whose service is
 * stopped, expired or moved to another host loses its source and listeners. Woken by HOST_SERVICES_CHANNEL, and
 * every few seconds.
 */
export class HostReconciler {
  private readonly task: PeriodicTask;
  private listener?: Client;
  /** The owner's title last sent to each mount, so that it is sent once. */
  private readonly titles = new Map<string, string>();

  constructor(
    private readonly db: Database,
    private readonly hostId: string,
    private readonly workers: HostWorkers,
    private readonly log: Logger,
    intervalMs = RECONCILE_INTERVAL_MS,
  ) {
    this.task = new PeriodicTask('host reconcile', () => this.pass(), intervalMs, log);
  }

  start(): void {
    this.task.start();
  }

  async stop(): Promise<void> {
    await this.task.stop();
    this.dropListener();
  }

  /** One pass: listens again if it lost the channel, then brings the host in line. */
  async pass(): Promise<void> {
    if (!this.listener) await this.listen().catch((err) => this.log.warn({ err }, 'host_services: cannot listen'));
    const admin = this.workers.admin();
    // Mounts first: a mount that shows here was admitted for a service committed before this read of services.
    const mounts = admin ? await admin.listMounts().catch(() => undefined) : undefined;
    const live = await this.db.query<ServiceRow & Record<string, unknown>>(LIVE_ON_HOST, [this.hostId]);
    const active = live.filter((s) => s.status === 'active' && !(s.expires_at && s.expires_at.getTime() <= Date.now()));
    await this.workers.autodj.sync(active);
    await this.workers.relays.sync(active);
    if (!admin || !mounts) return;
    const ours = new Set(live.map((s) => s.mount));
    for (const { mount } of mounts) if (!ours.has(mount)) await this.cut(mount);
    await this.sendOwnerTitles(active);
  }

  /** A mount no live service of this host owns: its source and listeners go (the callbacks refuse them again). */
  private async cut(mount: string): Promise<void> {
    const admin = this.workers.admin()!;
    this.log.info({ mount, host_id: this.hostId }, 'mount no longer served here: cutting it');
    await admin.killSource(mount).catch(() => false);
    for (const client of await admin.listClients(mount).catch(() => []))
      await admin.killClient(mount, client.id).catch(() => false);
    this.titles.delete(mount);
  }

  /** A title the owner set through any API instance reaches the players (ICY metadata) from here. */
  private async sendOwnerTitles(active: ServiceRow[]): Promise<void> {
    if (!active.length) return;
    const mounts = new Map(active.map((s) => [s.id, s.mount]));
    const rows = await this.db.query<{ service_id: string; title: string; artist: string | null }>(OWNER_TITLES, [
      [...mounts.keys()],
    ]);
    for (const row of rows) {
      const mount = mounts.get(row.service_id)!;
      const title = songText(row);
      if (this.titles.get(mount) === title) continue;
      if (
        await this.workers
          .admin()
          ?.updateMetadata(mount, title)
          .catch(() => false)
      )
        this.titles.set(mount, title);
    }
  }

  private async listen(): Promise<void> {
    const client = await this.db.dedicated();
    client.on('error', () => this.dropListener());
    client.on('notification', (n) => {
      if (n.channel === HOST_SERVICES_CHANNEL && n.payload === this.hostId) this.task.kick();
    });
    try {
      await client.query(`LISTEN ${HOST_SERVICES_CHANNEL}`);
    } catch (e) {
      client.release(true);
      throw e;
    }
    this.listener = client;
  }

  private dropListener(): void {
    const client = this.listener;
    this.listener = undefined;
    if (!client) return;
    client.removeAllListeners('notification');
    client.on('error', () => undefined);
    try {
      client.release(true);
    } catch {
      /* released already */
    }
  }
}
