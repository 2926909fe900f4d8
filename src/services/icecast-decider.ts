import { timingSafeEqual } from 'node:crypto';
import { recordMountEvent, type SourceEventType } from '../events/index.js';
import type { Logger } from '../log/index.js';
import { extensionHeadroomHours } from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { Decision, ForwardedClaim, ListenerAuthRequest, MountDecider } from '../provisioning/index.js';
import type { Database } from '../store/index.js';
import { AUTODJ_USER, AutoDjManager } from './autodj-manager.js';
import { ListenerSessions } from './listener-sessions.js';
import { RELAY_USER, RelayManager } from './relay-manager.js';
import { admitListener } from './listener-admission.js';
import type { ListenerPlaces } from './listener-places.js';
import type { ServiceRow } from './service-records.js';

/** 'ours': an internal reader with its secret; 'impostor': claims to be one without it; undefined: a listener. */
export interface InternalReaders {
  recognise(request: Pick<ListenerAuthRequest, 'user' | 'pass' | 'userAgent'>): 'ours' | 'impostor' | undefined;
}

const refuse = (message: string): Decision => ({ accept: false, message });
const MOVED_AWAY = 'this service is not on this streaming host (it moved): read its record for the current addresses';
const LEASE_LOST =
  'this streaming host lost touch with the pool (no heartbeat written): retry, or read the record for where it streams';

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What an IcecastDecider answers from; every part but the database and the log is optional (tests). */
export interface IcecastDeciderOptions {
  db: Database;
  log: Logger;
  autodj?: AutoDjManager;
  /** Rate-limits source events per service (src/events/source-event-gate.ts); without it each one is recorded. */
  sourceEvents?: { record(mount: string, type: SourceEventType): Promise<void> };
  /** The catalog being served, for how far a service could still be extended (a listener's time limit). */
  catalog?: LiveSnapshot;
  /** Recognises our own readers of the mounts (the HLS segmenter). */
  internalReaders?: InternalReaders;
  /** The streaming host whose Icecast calls back here; without it every service is answered for (tests). */
  hostId?: () => string;
  /** This host's listener places in memory; without it every admission is a database transaction. */
  places?: ListenerPlaces;
  /** Redeems the front door's ticket in a listener's credentials for its real address (provisioning/front-door). */
  forwarded?: (user: string, pass: string) => ForwardedClaim;
  /** True while this host's lease has run out (src/hosts/host-lease.ts): nothing is admitted. */
  leaseLost?: () => boolean;
}

/**
 * Answers Icecast's URL-auth callbacks from the service records: the order's own source credentials, its listener
 * cap and expiry.
 */
export class IcecastDecider implements MountDecider {
  private readonly db: Database;
  private readonly log: Logger;
  private readonly autodj?: AutoDjManager;
  private readonly sourceEvents?: IcecastDeciderOptions['sourceEvents'];
  private readonly catalog?: LiveSnapshot;
  private readonly internalReaders?: InternalReaders;
  private readonly hostId?: () => string;
  private readonly places?: ListenerPlaces;
  private readonly forwarded?: (user: string, pass: string) => ForwardedClaim;
  private readonly leaseLost?: () => boolean;

  constructor(options: IcecastDeciderOptions) {
    this.db = options.db;
    this.log = options.log;
    this.autodj = options.autodj;
    this.sourceEvents = options.sourceEvents;
    this.catalog = options.catalog;
    this.internalReaders = options.internalReaders;
    this.hostId = options.hostId;
    this.places = options.places;
    this.forwarded = options.forwarded;
    this.leaseLost = options.leaseLost;
  }

  /** The host epoch of each mount's service when its source was let in here (the reconciler compares it). */
  private readonly sourceEpochs = new Map<string, number>();

  /**
   * Fencing: a host answers only for the services placed on it now, and only while its lease holds (it
   * wrote a heartbeat recently enough that the pool has not counted it down). Once a service moved off this host (its
   * host_id changed with a new host_epoch), this Icecast refuses its sources and listeners, and its callbacks leave
   * the service's rows alone, so two hosts never both serve one service's mount. The host epoch it is served here
   * at, or undefined when it is not served here.
   */
  private async servedHere(mount: string): Promise<number | undefined> {
    if (!this.hostId) return 0;
    const [row] = await this.db.query<{ host_epoch: number }>(
      'SELECT host_epoch FROM services WHERE mount = $1 AND host_id = $2',
      [mount, this.hostId()],
    );
    return row?.host_epoch;
  }

  private async servesHere(mount: string): Promise<boolean> {
    return (await this.servedHere(mount)) !== undefined;
  }

  /**
   * Whether a mount whose source came or went is served here. Icecast's bookkeeping callbacks are answered even when
   * PostgreSQL does not answer in time: then whether this host let the mount's source in says it.
   */
  private async stillServesHere(mount: string, admittedHere: boolean): Promise<boolean> {
    return this.servesHere(mount).catch((err) => {
      this.log.warn({ err, mount }, 'could not read where the mount is served; going by the source this host let in');
      return admittedHere;
    });
  }

  /** The host epoch of the service whose source was let in on this mount, undefined when none was. */
  sourceEpoch(mount: string): number | undefined {
    return this.sourceEpochs.get(mount);
  }

  private async recordSource(mount: string, type: SourceEventType): Promise<void> {
    const recorded = this.sourceEvents ? this.sourceEvents.record(mount, type) : recordMountEvent(this.db, mount, type);
    await recorded.catch((err) => this.log.warn({ err, mount }, `could not record ${type}`));
  }

  private async live(mount: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>(
      "SELECT * FROM services WHERE mount = $1 AND status = 'active' AND (expires_at IS NULL OR expires_at > now())",
      [mount],
    );
    return row;
  }

  async authorizeSource(request: { mount: string; user: string; pass: string }): Promise<Decision> {
    if (this.unleased()) return refuse(LEASE_LOST);
    const epoch = await this.servedHere(request.mount);
    if (epoch === undefined) return refuse(MOVED_AWAY);
    const decision = await this.checkSource(request);
    if (decision.accept) this.sourceEpochs.set(request.mount, epoch);
    return decision;
  }

  /**
   * A title update an encoder sends (Icecast's /admin/metadata) with the mount's source credentials: the rules a
   * source is let in by, but it takes no mount, so AutoDJ keeps playing.
   */
  async authorizeMetadata(request: { mount: string; user: string; pass: string }): Promise<Decision> {
    if (this.unleased()) return refuse(LEASE_LOST);
    if ((await this.servedHere(request.mount)) === undefined) return refuse(MOVED_AWAY);
    return this.checkSource(request, false);
  }

  private async checkSource(
    { mount, user, pass }: { mount: string; user: string; pass: string },
    takesMount = true,
  ): Promise<Decision> {
    const service = await this.live(mount);
    if (!service) return refuse('no active service on this mount');
    if (!sameSecret(pass, service.source_password)) return refuse('wrong source credentials');
    const refusedUntil = sourceRefusedUntil(service);
    if (refusedUntil)
      return refuse(
        `the source sent above the bought bitrate; reconnect after ${refusedUntil.toISOString()} at ${String(service.limits.bitrate_kbps)} kbps`,
      );
    if (user === RELAY_USER)
      return RelayManager.wanted(service) ? { accept: true } : refuse('this service has no relay');
    if (user === AUTODJ_USER && this.autodj && AutoDjManager.wanted(service)) {
      return this.autodj.isLive(service.id) ? refuse('the live encoder holds the mount') : { accept: true };
    }
    if (!sameSecret(user, service.source_user)) return refuse('wrong source credentials');
    // The service's own encoder wins the mount: AutoDJ (if any) steps aside before Icecast checks the mount is free.
    if (takesMount && this.autodj && AutoDjManager.wanted(service)) await this.autodj.yieldTo(service);
    return { accept: true };
  }

  async authorizeListener(request: ListenerAuthRequest): Promise<Decision> {
    const { mount, clientId, userAgent } = request;
    const claim = this.forwarded?.(request.user, request.pass);
    if (claim === 'impostor') return refuse('not from the front door');
    const ip = claim?.ip ?? request.ip;
    const internal = this.internalReaders?.recognise(request);
    // Our own reader takes no listener place; a client that claims to be one without its secret is refused.
    if (internal) return internal === 'ours' ? { accept: true } : refuse('not an internal reader');
    if (this.unleased()) return refuse(LEASE_LOST);
    const session = { userAgent, protocol: 'icecast' } as const;
    // The places in memory hold only this host's services; without them the database says whether it serves here.
    if (!this.places && !(await this.servesHere(mount))) return refuse(MOVED_AWAY);
    const admitted = this.places
      ? await this.places.admit({ mount }, clientId, ip, session, request.waitForPlaceMs)
      : await admitListener(this.db, { mount }, clientId, ip, session);
    if (!admitted.accept) return refuse(admitted.message);
    // Its place is freed when the proxy sees it go, before Icecast's listener_remove: after a blip the listeners
    // coming back may be asked about before Icecast reports that they left. Registered for every admitted listener:
    // HAProxy reports a listener's bytes only for a connection serve waits for.
    if (claim)
      claim.whenGone(() => {
        if (!this.places) return;
        this.listenerLeft({ mount, clientId }).catch((err) => this.log.warn({ err, mount }, 'could not free a place'));
      });
    return { accept: true, ...listenerTimeLimit(admitted.service, this.catalog) };
  }

  /**
   * Without its lease this host serves nothing and may be cut off from PostgreSQL, where a query hangs: Icecast
   * waits for each callback (one at a time per authenticator) before it closes a listener it dropped, so the
   * bookkeeping callbacks answer at once from memory. No source event is recorded (the host cannot tell whether the
   * service is still its own); what they leave in the listeners table is what a lost listener_remove leaves: the
   * service's move frees it, or the life-cycle worker once the lease is back.
   */
  private unleased(): boolean {
    return this.leaseLost?.() ?? false;
  }

  async listenerLeft({ mount, clientId }: { mount: string; clientId: string }): Promise<void> {
    if (this.unleased()) return;
    if (this.places) return this.places.release({ mount }, [clientId]);
    if (!(await this.servesHere(mount))) return;
    await this.db.query(
      'DELETE FROM listeners l USING services s WHERE l.service_id = s.id AND s.mount = $1 AND l.client_id = $2',
      [mount, clientId],
    );
  }

  async mountAdded({ mount }: { mount: string }): Promise<void> {
    if (this.unleased()) return this.places?.sourceConnected(mount);
    if (!(await this.stillServesHere(mount, this.sourceEpochs.has(mount)))) return;
    this.log.info({ mount }, 'source connected');
    this.places?.sourceConnected(mount);
    await this.recordSource(mount, 'source.connected');
  }

  async mountRemoved({ mount }: { mount: string }): Promise<void> {
    const admittedHere = this.sourceEpochs.delete(mount);
    if (this.unleased()) return this.places?.sourceDisconnected(mount);
    if (!(await this.stillServesHere(mount, admittedHere))) return;
    this.log.info({ mount }, 'source disconnected');
    await this.recordSource(mount, 'source.disconnected');
    const [service] = await this.db
      .query<{ id: string }>('SELECT id FROM services WHERE mount = $1', [mount])
      .catch((err) => {
        this.log.warn({ err, mount }, 'could not read whose AutoDJ may take the freed mount; its next pass will');
        return [];
      });
    // Not awaited: it may ask Icecast's admin API, which should not wait on Icecast's own callback.
    if (service)
      void this.autodj
        ?.mountFreed(service.id, mount)
        .catch((err) => this.log.warn({ err, mount }, 'could not tell who left the mount'));
    // HLS sessions (client_id hls:…) end by themselves when their clients stop fetching.
    if (this.places) return this.places.releaseIcecast(mount);
    await this.db.query(
      `DELETE FROM listeners l USING services s
      WHERE l.service_id = s.id AND s.mount = $1 AND l.client_id NOT LIKE 'hls:%'`,
      [mount],
    );
  }
}

/**
 * Icecast cannot change a connected listener's time limit, and an extension moves the expiry: the limit given is only
 * a backstop at the latest expiry the service could still be extended to; the life-cycle worker cuts listeners at the
 * real expiry, read again on every pass.
 */
function listenerTimeLimit(service: ServiceRow, catalog?: LiveSnapshot): { timeLimitSeconds?: number } {
  if (!service.expires_at) return {};
  const headroomMs = catalog && !service.stopped_at ? extensionHeadroomHours(catalog.current, service) * 3_600_000 : 0;
  return { timeLimitSeconds: Math.max(1, Math.floor((service.expires_at.getTime() + headroomMs - Date.now()) / 1000)) };
}

/** Set while a source that used up its bitrate budget is kept out (the life-cycle worker saves it with the usage). */
function sourceRefusedUntil(service: ServiceRow): Date | null {
  const until = (service.usage?.source_budget as { refused_until?: unknown } | undefined)?.refused_until;
  const at = typeof until === 'string' ? new Date(until) : null;
  return at && at.getTime() > Date.now() ? at : null;
}
