import type { Logger } from '../log/index.js';
import { listclientsLagMs } from '../provisioning/index.js';
import { ChannelListener, type Database } from '../store/index.js';
import { admitListener, capRefusalMessage, type Admission } from './listener-admission.js';
import type { NewListenerSession } from './listener-sessions.js';
import { PlaceWriter } from './place-writer.js';
import { listenerCapOf, type ServiceRow } from './service-records.js';

/** Notified with a service's id by migration 051's trigger whenever what decides its admissions changes. */
export const ADMISSION_CHANNEL = 'service_admission';

/** A live service on this host and the places taken on it: client id → when admitted (ms since the epoch). */
interface Entry {
  service: ServiceRow;
  cap: number;
  places: Map<string, number>;
}

type Where = { mount: string } | { serviceId: string };
type SessionFacts = Pick<NewListenerSession, 'userAgent' | 'protocol'>;
const REFUSAL_EVENT_MS = 60_000;

/**
 * The listener places of the services on this streaming host, held in memory and answered from it: Icecast's
 * listener callbacks (one at a time per authenticator) and HLS admissions take no database round trip. PostgreSQL
 * pushes every change to a service's admission (status, expiry, cap, mount, host, stop: migration 051) and the whole
 * view is read again every `fullPassMs` (and whenever the notification channel comes back), so a lost notification
 * lasts one pass at most. The clock decides expiry at each callback, not the copy. Only this process admits on its
 * host's services, and JavaScript runs one callback at a time: check-and-take of a place is exact. The places are
 * written to the listeners table behind the answers (PlaceWriter); each pass reads them back from it, after the
 * life-cycle worker has reconciled it with Icecast's own listclients. Until the view is loaded (or while the
 * notification channel is down) admissions go to the database as before (admitListener).
 */
export class ListenerPlaces {
  private byMount = new Map<string, Entry>();
  private byId = new Map<string, Entry>();
  /** Services notified and being read again: their callbacks wait for the new row. */
  private readonly refreshing = new Map<string, Promise<void>>();
  /** Notified while a full pass was reading: read again once it is done. */
  private readonly notifiedDuringPass = new Set<string>();
  /** Places released since the running pass began (that pass may read them from the table before their delete). */
  private readonly releasedDuringPass = new Set<string>();
  private passing?: Promise<void>;
  private loaded = false;
  /** Counts the times memory went stale (see unload): a pass that began before one does not make it live. */
  private generation = 0;
  private timer?: NodeJS.Timeout;
  private readonly channel: ChannelListener;
  private readonly writer: PlaceWriter;
  private readonly refusalRecordedAt = new Map<string, number>();
  /** Mounts whose source left (mount_remove) and has not come back (mount_add). */
  private readonly sourceGone = new Set<string>();
  /** Admissions waiting for a place of a full service to be freed, by service id. */
  private readonly awaitingPlace = new Map<string, Set<() => void>>();

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    private readonly hostId: () => string,
    private readonly fullPassMs = 30_000,
  ) {
    this.writer = new PlaceWriter(db, log);
    this.channel = new ChannelListener(db, ADMISSION_CHANNEL, {
      onNotified: (serviceId) => this.notified(serviceId),
      onLost: () => this.unload(),
      onListening: () => void this.readAgain(),
    });
  }

  /** True while admissions are answered from memory. */
  get live(): boolean {
    return this.loaded && this.channel.listening;
  }

  async start(): Promise<void> {
    await this.channel.start();
    await this.pass();
    this.timer = setInterval(() => void this.pass(), this.fullPassMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.loaded = false;
    await this.channel.stop();
    await this.passing?.catch(() => undefined);
    await this.writer.stop();
  }

  /**
   * What memory holds can no longer be trusted: this host's lease ran out (it may have been cut off while its
   * services moved), or a query got no answer (the partition that kept it may have left the channel's connection
   * open and silent, notifications lost). Admissions go to the database until the channel listens again on a new
   * connection and everything has been read again.
   */
  forget(reason: string): void {
    if (this.loaded) this.log.warn({ reason }, 'listener places: memory dropped until read again');
    this.unload();
    this.channel.restart(reason);
  }

  /** Memory is stale: a pass already under way read it before this, and cannot make it live again. */
  private unload(): void {
    this.loaded = false;
    this.generation++;
  }

  /** Listening again: everything is read after the LISTEN (after any pass that began before it). */
  private async readAgain(): Promise<void> {
    await this.passing;
    await this.pass();
  }

  /**
   * Takes a place for `clientId` on the service, or refuses: the service is not live here, or all places are taken.
   * A full service refuses after `waitForPlaceMs` in which no place was freed.
   */
  async admit(
    where: Where,
    clientId: string,
    ip: string,
    session: SessionFacts,
    waitForPlaceMs = 0,
  ): Promise<Admission> {
    if (!this.live) {
      await this.writer.flush();
      return admitListener(this.db, where, clientId, ip, session, this.hostId());
    }
    const pending = this.refreshing.get(this.idOf(where) ?? '');
    if (pending) await pending;
    const entry = this.entryOf(where) ?? (await this.readNew(where));
    const now = Date.now();
    if (!entry || (entry.service.expires_at && entry.service.expires_at.getTime() <= now))
      return { accept: false, message: 'no active stream on this mount' };
    // Icecast drops a listener of a mount without a source after its callback, and never calls listener_remove.
    if ('mount' in where && this.sourceGone.has(where.mount))
      return { accept: false, message: 'the stream is not on the air' };
    const taken = entry.places.size - (entry.places.has(clientId) ? 1 : 0);
    if (taken >= entry.cap) {
      const waitFrom = Date.now();
      if (waitForPlaceMs > 0 && (await this.placeFreed(entry.service.id, waitForPlaceMs)))
        return this.admit(where, clientId, ip, session, waitForPlaceMs - (Date.now() - waitFrom));
      this.recordRefusal(entry);
      return { accept: false, service: entry.service, message: capRefusalMessage(entry.cap) };
    }
    if (!entry.places.has(clientId)) {
      entry.places.set(clientId, now);
      this.writer.push({ kind: 'add', serviceId: entry.service.id, clientId, ip, at: now, session });
    }
    return { accept: true, service: entry.service };
  }

  /**
   * A live service of this host as memory holds it (kept current by notifications), for HLS playlists to check it
   * without a query; undefined when memory does not hold it or cannot be trusted (the caller asks the database).
   */
  async activeService(serviceId: string): Promise<ServiceRow | undefined> {
    if (!this.live) return undefined;
    await this.refreshing.get(serviceId);
    return this.live ? this.byId.get(serviceId)?.service : undefined;
  }

  /** Frees the places of these clients (they left). */
  async release(where: Where, clientIds: string[]): Promise<void> {
    const serviceId = this.idOf(where) ?? (await this.lookUpId(where));
    if (!serviceId) return;
    const entry = this.byId.get(serviceId);
    for (const clientId of clientIds) {
      entry?.places.delete(clientId);
      if (this.passing) this.releasedDuringPass.add(`${serviceId} ${clientId}`);
    }
    this.writer.push({ kind: 'remove', serviceId, clientIds });
    this.wakeAwaiting(serviceId);
    if (!this.live) await this.writer.flush();
  }

  sourceConnected(mount: string): void {
    this.sourceGone.delete(mount);
  }

  /** The source left; memory only (this host's lease is out: releaseIcecast would write to the database). */
  sourceDisconnected(mount: string): void {
    this.sourceGone.add(mount);
  }

  /**
   * The Icecast listeners connected per service, as the life-cycle worker's listclients found them: places of
   * listeners Icecast no longer has (their listener_remove was lost, or Icecast dropped them after their callback
   * without one) are freed; the worker deletes their rows.
   */
  observeIcecast(connected: Map<string, string[]>): void {
    const now = Date.now();
    for (const [serviceId, clientIds] of connected) {
      const places = this.byId.get(serviceId)?.places;
      const present = new Set(clientIds);
      for (const [clientId, at] of places ?? [])
        if (!clientId.startsWith('hls:') && !present.has(clientId) && now - at > listclientsLagMs(clientId))
          places!.delete(clientId);
    }
  }

  /** The source left: Icecast dropped its listeners (HLS sessions keep theirs until they idle out). */
  async releaseIcecast(mount: string): Promise<void> {
    this.sourceDisconnected(mount);
    const serviceId = this.idOf({ mount }) ?? (await this.lookUpId({ mount }));
    if (!serviceId) return;
    const entry = this.byId.get(serviceId);
    for (const clientId of entry?.places.keys() ?? []) {
      if (clientId.startsWith('hls:')) continue;
      entry!.places.delete(clientId);
      if (this.passing) this.releasedDuringPass.add(`${serviceId} ${clientId}`);
    }
    this.writer.push({ kind: 'remove-icecast', serviceId });
    this.wakeAwaiting(serviceId);
    if (!this.live) await this.writer.flush();
  }

  /** True once a place of the service is freed within `ms`, false when none was. */
  private placeFreed(serviceId: string, ms: number): Promise<boolean> {
    const waiters = this.awaitingPlace.get(serviceId) ?? new Set<() => void>();
    this.awaitingPlace.set(serviceId, waiters);
    return new Promise((resolve) => {
      const done = (freed: boolean) => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (!waiters.size && this.awaitingPlace.get(serviceId) === waiters) this.awaitingPlace.delete(serviceId);
        resolve(freed);
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), ms);
      waiters.add(wake);
    });
  }

  private wakeAwaiting(serviceId: string): void {
    for (const wake of [...(this.awaitingPlace.get(serviceId) ?? [])]) wake();
  }

  /** Every place written to the database (tests, and before a database-side admission). */
  flush(): Promise<void> {
    return this.writer.flush();
  }

  private entryOf(where: Where): Entry | undefined {
    return 'mount' in where ? this.byMount.get(where.mount) : this.byId.get(where.serviceId);
  }

  private idOf(where: Where): string | undefined {
    return 'serviceId' in where ? where.serviceId : this.byMount.get(where.mount)?.service.id;
  }

  /** A service memory does not know (sold a moment ago, its notification on its way): read it now. */
  private async readNew(where: Where): Promise<Entry | undefined> {
    const serviceId = await this.lookUpId(where);
    if (!serviceId) return undefined;
    this.reread(serviceId);
    await this.refreshing.get(serviceId);
    return this.entryOf(where);
  }

  private async lookUpId(where: Where): Promise<string | undefined> {
    if ('serviceId' in where) return where.serviceId;
    const [row] = await this.db.query<{ id: string }>('SELECT id FROM services WHERE mount = $1', [where.mount]);
    return row?.id;
  }

  private recordRefusal(entry: Entry): void {
    const id = entry.service.id;
    if (Date.now() - (this.refusalRecordedAt.get(id) ?? 0) < REFUSAL_EVENT_MS) return;
    this.refusalRecordedAt.set(id, Date.now());
    this.writer.push({ kind: 'refused', serviceId: id, cap: entry.cap });
  }

  /**
   * A service's admission changed: a service memory holds (or is reading) is read again. One it does not hold, such as
   * one sold a moment ago, is read when a listener first asks for it (readNew), or by the next pass: a sale costs no
   * read here, and what is read then is its state at that time.
   */
  private notified(serviceId: string): void {
    if (this.byId.has(serviceId) || this.refreshing.has(serviceId)) this.reread(serviceId);
    // The running pass may have read it before this change: looked at again once the pass is done.
    else if (this.passing) this.notifiedDuringPass.add(serviceId);
  }

  /** Reads the service's row again; its callbacks wait for it. */
  private reread(serviceId: string): void {
    if (this.passing) this.notifiedDuringPass.add(serviceId);
    const previous = this.refreshing.get(serviceId) ?? Promise.resolve();
    const next = previous
      .then(() => this.refresh(serviceId))
      .catch((err) => {
        // Unknown state: refuse from memory until the next pass reads it.
        this.drop(serviceId);
        this.log.warn({ err, service_id: serviceId }, 'listener places: could not read a notified service');
        this.forgetIfUnavailable(err);
      });
    this.refreshing.set(serviceId, next);
    void next.then(() => {
      if (this.refreshing.get(serviceId) === next) this.refreshing.delete(serviceId);
    });
  }

  private async refresh(serviceId: string): Promise<void> {
    // A service memory does not know yet (sold a moment ago) has its places read with its row, in one round trip,
    // after what this host wrote of them.
    const unknown = !this.byId.has(serviceId);
    if (unknown) await this.writer.flush();
    type Found = ServiceRow & Record<string, unknown> & { stored_places: Array<[string, string]> | null };
    const [found] = await this.db.query<Found>(
      `SELECT s.*, CASE WHEN $3 THEN (
         SELECT coalesce(json_agg(json_build_array(l.client_id,
                                                   (extract(epoch FROM l.connected_at) * 1000)::bigint::text)), '[]')
           FROM listeners l WHERE l.service_id = s.id) END AS stored_places
       FROM services s WHERE s.id = $1 AND s.host_id = $2 AND s.status = 'active'`,
      [serviceId, this.hostId(), unknown],
    );
    if (!found) return this.drop(serviceId);
    const { stored_places: stored, ...row } = found;
    const known = this.byId.get(serviceId);
    const places =
      known?.places ??
      (stored ? new Map(stored.map(([clientId, at]) => [clientId, Number(at)])) : undefined) ??
      (await this.placesOf([serviceId])).get(serviceId) ??
      new Map<string, number>();
    if (known && known.service.mount !== row.mount) this.byMount.delete(known.service.mount);
    this.put({ service: row, cap: listenerCapOf(row.limits), places });
  }

  private drop(serviceId: string): void {
    const known = this.byId.get(serviceId);
    if (!known) return;
    this.byId.delete(serviceId);
    this.byMount.delete(known.service.mount);
  }

  private put(entry: Entry): void {
    this.byId.set(entry.service.id, entry);
    this.byMount.set(entry.service.mount, entry);
  }

  /** Reads every live service of this host and its places again (one pass at a time). */
  private pass(): Promise<void> {
    this.passing ??= this.readAll()
      .catch((err) => {
        this.log.warn({ err }, 'listener places: full pass failed; retried on the next one');
        this.forgetIfUnavailable(err);
      })
      .finally(() => {
        this.passing = undefined;
        this.releasedDuringPass.clear();
        for (const id of this.notifiedDuringPass) this.notified(id);
        this.notifiedDuringPass.clear();
      });
    return this.passing;
  }

  private forgetIfUnavailable(err: unknown): void {
    if ((err as { code?: string }).code === 'store_unavailable') this.forget('a query got no answer');
  }

  private async readAll(): Promise<void> {
    const startedAt = Date.now();
    const generation = this.generation;
    await this.writer.flush();
    const rows = await this.db.query<ServiceRow & Record<string, unknown>>(
      "SELECT * FROM services WHERE host_id = $1 AND status = 'active'",
      [this.hostId()],
    );
    const stored = await this.placesOf(rows.map((r) => r.id));
    const byId = new Map<string, Entry>();
    const byMount = new Map<string, Entry>();
    for (const service of rows) {
      const places = new Map<string, number>();
      for (const [clientId, at] of stored.get(service.id) ?? [])
        if (!this.releasedDuringPass.has(`${service.id} ${clientId}`)) places.set(clientId, at);
      // Admitted after the pass began: maybe not in what it read.
      for (const [clientId, at] of this.byId.get(service.id)?.places ?? [])
        if (at >= startedAt) places.set(clientId, at);
      const entry = { service, cap: listenerCapOf(service.limits), places };
      byId.set(service.id, entry);
      byMount.set(service.mount, entry);
    }
    this.byId = byId;
    this.byMount = byMount;
    for (const mount of this.sourceGone) if (!byMount.has(mount)) this.sourceGone.delete(mount);
    this.loaded = this.channel.listening && generation === this.generation;
  }

  private async placesOf(serviceIds: string[]): Promise<Map<string, Map<string, number>>> {
    const rows = await this.db.query<{ service_id: string; client_id: string; at: string }>(
      `SELECT service_id, client_id, (extract(epoch FROM connected_at) * 1000)::bigint::text AS at
       FROM listeners WHERE service_id = ANY($1::text[])`,
      [serviceIds],
    );
    const out = new Map<string, Map<string, number>>();
    for (const r of rows) {
      const places = out.get(r.service_id) ?? new Map<string, number>();
      places.set(r.client_id, Number(r.at));
      out.set(r.service_id, places);
    }
    return out;
  }
}
