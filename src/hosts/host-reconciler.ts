import type { Logger } from '../log/index.js';
import { SERVICE_ROW_COLUMNS, songText, type ServiceRow } from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import { PeriodicTask } from '../tasks/index.js';

/**
 * The channel that wakes a streaming host's reconciler. Migration 050's trigger on services sends it at commit
 * whenever a service of the host is created, changes status, limits, expiry or host (both hosts of a move), or its
 * host epoch changes, with '<host id> <service id>' as payload (migration 057): the woken pass reads that service
 * only. Anyone may send `NOTIFY host_services, '<host id>'` too (the owner's title, below): a pass that reads every
 * live service of the host. The periodic full pass covers notifications lost while the connection was down.
 */
export const HOST_SERVICES_CHANNEL = 'host_services';

/**
 * Woken passes start at least this far apart: each reads every live service of the host, and a burst of sales wakes it
 * for each one (a pass per purchase cost more than the purchase's own statements, and grew with the live services).
 */
const WOKEN_PASS_GAP_MS = 300;

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
  /** The host epoch of the service whose source this host's Icecast let in on a mount, as the callback read it. */
  sourceEpoch?(mount: string): number | undefined;
  /** False once this host's lease ran out (src/hosts/host-lease.ts): it then serves nothing. */
  leaseHeld?(): boolean;
  /**
   * The owner's title last sent to each mount, shared with this process's API, which sends it at once: sent again
   * later, it would replace a title a live encoder sent meanwhile.
   */
  titlesSent?: Map<string, string>;
}

/** Where a HostReconciler runs and what it drives. */
export interface HostReconcilerOptions {
  db: Database;
  hostId: string;
  workers: HostWorkers;
  log: Logger;
  /** How often it reconciles without being woken (HOST_RECONCILE_INTERVAL_MS). */
  intervalMs: number;
}

const LIVE_ON_HOST = `SELECT ${SERVICE_ROW_COLUMNS}, host_epoch FROM services
  WHERE host_id = $1 AND status IN ('active', 'suspended')`;
const NOTIFIED = `SELECT ${SERVICE_ROW_COLUMNS}, host_epoch FROM services WHERE id = ANY($1)`;

type LiveRow = ServiceRow & Record<string, unknown>;
// What plays now on each of these services, when the owner set it (PUT now-playing, through any API instance).
const OWNER_TITLES = `SELECT service_id, title, artist FROM (
    SELECT DISTINCT ON (service_id) service_id, title, artist, source FROM now_playing
     WHERE service_id = ANY($1) ORDER BY service_id, id DESC) latest
  WHERE source = 'owner'`;

/**
 * Makes what runs on this streaming host match PostgreSQL, whatever API instance changed it: the services placed here
 * get their AutoDJ and relay (their mount limits are read by the URL-auth callbacks), and a mount whose service is
 * stopped, expired or moved to another host loses its source and listeners. Woken by HOST_SERVICES_CHANNEL, and
 * every HOST_RECONCILE_INTERVAL_MS.
 */
export class HostReconciler {
  private readonly task: PeriodicTask;
  private listener?: Client;
  /** The owner's title last sent to each mount, so that it is sent once. */
  private readonly titles: Map<string, string>;
  /** Set while the lease is lost and the host serves nothing (logged once). */
  private fenced = false;
  /** The live services of this host as last read (by id); undefined until a full pass has read them. */
  private live?: Map<string, LiveRow>;
  /** When the last full pass began: one runs at least every `intervalMs`, however often notifications wake passes. */
  private fullPassAt = 0;
  /** Services notified since the last pass began; `all` when a notification asked for a full pass. */
  private notified = new Set<string>();
  private notifiedAll = false;

  private readonly db: Database;
  private readonly hostId: string;
  private readonly workers: HostWorkers;
  private readonly log: Logger;
  private readonly intervalMs: number;

  constructor(options: HostReconcilerOptions) {
    this.db = options.db;
    this.hostId = options.hostId;
    this.workers = options.workers;
    this.log = options.log;
    this.intervalMs = options.intervalMs;
    this.task = new PeriodicTask('host reconcile', () => this.passOrListenAnew(), {
      intervalMs: this.intervalMs,
      log: this.log,
      kickGapMs: WOKEN_PASS_GAP_MS,
    });
    this.titles = this.workers.titlesSent ?? new Map();
  }

  start(): void {
    this.task.start();
  }

  async stop(): Promise<void> {
    await this.task.stop();
    this.dropListener();
  }

  /** One full pass: listens again if it lost the channel, then brings the host in line. */
  pass(): Promise<void> {
    return this.reconcile(true);
  }

  /**
   * A pass that reads every live service of the host, or, woken by notifications naming services, only those (a
   * full one still runs every `intervalMs`, and whenever the channel may have lost notifications).
   */
  private async reconcile(fullAsked: boolean): Promise<void> {
    if (!this.leaseHeld()) return this.fence();
    this.fenced = false;
    // Notified from here on: read by the next pass (this one may read before their commits).
    const notified = this.notified;
    const full =
      fullAsked || this.notifiedAll || !this.live || !this.listener || Date.now() - this.fullPassAt >= this.intervalMs;
    this.notified = new Set();
    this.notifiedAll = false;
    if (!this.listener) await this.listen().catch((err) => this.log.warn({ err }, 'host_services: cannot listen'));
    if (full) this.fullPassAt = Date.now();
    const admin = this.workers.admin();
    // Mounts first: a mount that shows here was admitted for a service committed before this read of services.
    const mounts = admin ? await admin.listMounts().catch(() => undefined) : undefined;
    const changed = full ? await this.readAll() : await this.readNotified(notified);
    // The lease may have run out while PostgreSQL was slow to answer: what was read may be stale by now.
    if (!this.leaseHeld()) return this.fence();
    const live = [...this.live!.values()];
    const active = live.filter((s) => s.status === 'active' && !(s.expires_at && s.expires_at.getTime() <= Date.now()));
    await this.workers.autodj.sync(active);
    await this.workers.relays.sync(active);
    if (!admin || !mounts) return;
    const epochs = new Map(live.map((s) => [s.mount, Number(s.host_epoch)]));
    // A woken pass looks only at the mounts of the services it read: a mount of a service committed just now, whose
    // notification is still on its way, is not cut for being unknown (a mount of no service waits for a full pass).
    const looked = full ? undefined : new Set(changed.map((s) => s.mount));
    for (const { mount } of mounts)
      if ((!looked || looked.has(mount)) && !this.servedHere(mount, epochs)) await this.cut(mount);
    await this.sendOwnerTitles(full ? active : active.filter((s) => looked!.has(s.mount)));
  }

  /** Every live service of the host, read again. */
  private async readAll(): Promise<LiveRow[]> {
    const rows = await this.db.query<LiveRow>(LIVE_ON_HOST, [this.hostId]);
    this.live = new Map(rows.map((s) => [s.id, s]));
    return rows;
  }

  /**
   * The notified services, read again: those live here are kept, the others (stopped, ended, moved away) dropped.
   * Returns the rows read and what was held of them before (the mounts of both are looked at).
   */
  private async readNotified(ids: Set<string>): Promise<LiveRow[]> {
    if (!ids.size) return [];
    const rows = await this.db.query<LiveRow>(NOTIFIED, [[...ids]]);
    const live = this.live!;
    const gone = [...ids].flatMap((id) => {
      const known = live.get(id);
      live.delete(id);
      return known ? [known] : [];
    });
    for (const row of rows)
      if (row.host_id === this.hostId && ['active', 'suspended'].includes(row.status)) live.set(row.id, row);
    return [...rows, ...gone];
  }

  /**
   * A pass whose query got no answer (the database's connections bound each one) may have waited on a connection a
   * partition left silent; the channel's connection may be silent too, and miss every notification: the next pass
   * (in `intervalMs`, as after any failure) listens on a new one.
   */
  private async passOrListenAnew(): Promise<void> {
    try {
      await this.reconcile(false);
    } catch (err) {
      if (this.listener) this.log.warn({ host_id: this.hostId }, 'host reconcile failed: listening again next pass');
      this.dropListener();
      throw err;
    }
  }

  /**
   * The lease ran out: this host may have been counted down and its services moved, and it cannot tell. Its AutoDJs
   * and relays stop and every mount loses its source and listeners; the callbacks admit nothing until a heartbeat is
   * written again, and the next pass after that brings back what is still placed here. Needs no database.
   */
  async fence(): Promise<void> {
    this.live = undefined;
    if (!this.fenced) this.log.warn({ host_id: this.hostId }, 'lease lost (no heartbeat written): cutting every mount');
    this.fenced = true;
    await this.workers.autodj.sync([]);
    await this.workers.relays.sync([]);
    const admin = this.workers.admin();
    const mounts = admin ? await admin.listMounts().catch(() => []) : [];
    for (const { mount } of mounts) await this.cut(mount);
  }

  private leaseHeld(): boolean {
    return this.workers.leaseHeld?.() ?? true;
  }

  /**
   * Whether a mount on this Icecast belongs to a live service of this host, and its source was let in for the
   * service's current placement here: a service that moved away and back (a new host epoch) while the old source
   * stayed connected is cut too.
   */
  private servedHere(mount: string, epochs: Map<string, number>): boolean {
    const epoch = epochs.get(mount);
    if (epoch === undefined) return false;
    const admitted = this.workers.sourceEpoch?.(mount);
    return admitted === undefined || admitted === epoch;
  }

  /** A mount no live service of this host owns: its source and listeners go (the callbacks refuse them again). */
  private async cut(mount: string): Promise<void> {
    const admin = this.workers.admin()!;
    this.log.info({ mount, host_id: this.hostId }, 'mount not served here: cutting it');
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
      if (n.channel === HOST_SERVICES_CHANNEL) this.onNotified(n.payload ?? '');
    });
    try {
      await client.query(`LISTEN ${HOST_SERVICES_CHANNEL}`);
    } catch (e) {
      client.release(true);
      throw e;
    }
    this.listener = client;
  }

  /** '<host id> <service id>' wakes a pass that reads that service; the host id alone, one that reads all. */
  private onNotified(payload: string): void {
    const space = payload.lastIndexOf(' ');
    const hostId = space < 0 ? payload : payload.slice(0, space);
    if (hostId !== this.hostId) return;
    if (space < 0) this.notifiedAll = true;
    else this.notified.add(payload.slice(space + 1));
    this.task.kick();
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
