import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log/index.js';
import { AutoDj, type IcecastAdmin } from '../provisioning/index.js';
import type { Database } from '../store/index.js';
import { hasAutoDj } from './has-autodj.js';
import type { MediaLibrary } from './media-library.js';
import { songText, type NowPlaying } from './now-playing.js';
import type { ServiceRow } from './service-records.js';

/** The source user AutoDJ connects as; the service's own encoder uses "source" and takes over from it. */
export const AUTODJ_USER = 'autodj';
/** A mount freed this soon after AutoDJ yielded is AutoDJ's own disconnect, not the live encoder leaving. */
const OWN_DISCONNECT_MS = 2000;
/** How long a yield waits for Icecast to let go of the mount AutoDJ left. */
const MOUNT_RELEASE_WAIT_MS = 3000;
/** After this long a yielded mount without a source means the live encoder left unheard. */
const LIVE_CHECK_MS = 10_000;

/** What an AutoDjManager works with. */
export interface AutoDjDeps {
  db: Database;
  media: MediaLibrary;
  /** Where AutoDJ connects as a source. */
  icecastUrl: () => string;
  admin: () => IcecastAdmin | undefined;
  log: Logger;
  /** Told each track AutoDJ plays, for the mount's metadata and the now-playing record. */
  nowPlaying?: NowPlaying;
}

/**
 * One AutoDJ per active service with an AutoDJ (hasAutoDj) on this instance's Icecast, while no live encoder of its
 * own is connected. It plays the playlist (or every uploaded file) and updates the mount's metadata on each track.
 */
export class AutoDjManager {
  private readonly running = new Map<string, AutoDj>();
  /** Services whose live encoder holds the mount (and since when): AutoDJ waits until it leaves. */
  private readonly liveSources = new Map<string, number>();
  /** Services whose AutoDJ is stepping aside right now: the mount freed meanwhile is AutoDJ's own disconnect. */
  private readonly yielding = new Set<string>();

  constructor(private readonly deps: AutoDjDeps) {}

  static wanted(service: ServiceRow): boolean {
    return service.status === 'active' && hasAutoDj(service);
  }

  /**
   * Starts what should run and stops what should not; called by the host reconciler and on every life-cycle pass.
   * `among`: the services the caller read, when its read may be old (a life-cycle pass reads when it begins). A
   * service bought since has an AutoDJ the reconciler started meanwhile, and it runs on: stopped there, it would begin
   * again a pass later. One stopped since is started only if the database still has it active.
   */
  async sync(services: ServiceRow[], among?: ReadonlySet<string>): Promise<void> {
    await this.noticeLiveEncodersGone(services);
    const wanted = new Map(
      services.filter((s) => AutoDjManager.wanted(s) && !this.liveSources.has(s.id)).map((s) => [s.id, s]),
    );
    for (const id of this.running.keys()) if (!wanted.has(id) && (!among || among.has(id))) await this.stop(id);
    const starting = [...wanted.values()].filter((s) => !this.running.has(s.id));
    // Unconfirmed (the database did not answer), nothing starts: the next pass asks again.
    const confirmed = among && starting.length ? await this.stillActive(starting).catch(() => new Set()) : undefined;
    for (const service of starting) if (!confirmed || confirmed.has(service.id)) this.start(service);
  }

  /** Which of these services PostgreSQL has active and not expired now. */
  private async stillActive(services: ServiceRow[]): Promise<Set<string>> {
    const rows = await this.deps.db.query<{ id: string }>(
      `SELECT id FROM services WHERE id = ANY($1::text[]) AND status = 'active'
         AND (expires_at IS NULL OR expires_at > now())`,
      [services.map((s) => s.id)],
    );
    return new Set(rows.map((row) => row.id));
  }

  /**
   * The service's own encoder asks for the mount: AutoDJ steps aside first, so Icecast can give it the mount. Its
   * encoder gone, Icecast still holds the mount until its source thread reads the hang-up; the encoder admitted before
   * that would be told the mount is in use.
   */
  async yieldTo(service: Pick<ServiceRow, 'id' | 'mount'>): Promise<void> {
    this.liveSources.set(service.id, Date.now());
    if (!this.running.has(service.id)) return;
    this.yielding.add(service.id);
    try {
      await this.stop(service.id);
      // A loaded Icecast can read AutoDJ's hang-up later than the wait: the mount is then taken from it, since only
      // AutoDJ can hold it while the live encoder waits on this decision.
      if (!(await this.released(service.mount, MOUNT_RELEASE_WAIT_MS))) {
        this.deps.log.warn(
          { service_id: service.id },
          'Icecast still held the mount AutoDJ left: its source is killed',
        );
        await this.deps
          .admin()
          ?.killSource(service.mount)
          .catch(() => false);
        await this.released(service.mount, MOUNT_RELEASE_WAIT_MS);
      }
    } finally {
      this.yielding.delete(service.id);
      // The news of AutoDJ's disconnect may come after this wait: it must still read as AutoDJ's own.
      this.liveSources.set(service.id, Date.now());
    }
  }

  isLive(serviceId: string): boolean {
    return this.liveSources.has(serviceId);
  }

  /**
   * Icecast reports that the mount has no source any more. During a yield or right after one (also when the report
   * is read after the yield ended) that is AutoDJ's own disconnect, so the live encoder keeps the turn; later it is the
   * live encoder leaving, and AutoDJ takes over again.
   */
  async mountFreed(serviceId: string, mount: string): Promise<void> {
    const since = this.liveSources.get(serviceId);
    const own = () => this.yielding.has(serviceId) || this.liveSources.get(serviceId) !== since;
    if (since === undefined || own() || Date.now() - since <= OWN_DISCONNECT_MS) return;
    // On a loaded host AutoDJ's own disconnect may be reported late: the mount has a source then, the live one.
    if ((await this.hasSource(mount)) || own()) return;
    this.liveSources.delete(serviceId);
  }

  /**
   * A live encoder that left without its leaving being heard (a callback lost, or taken for AutoDJ's own
   * disconnect) is noticed here: its mount has had no source for a while, and AutoDJ takes over again.
   */
  private async noticeLiveEncodersGone(services: ServiceRow[]): Promise<void> {
    const waiting = services.filter((s) => Date.now() - (this.liveSources.get(s.id) ?? Date.now()) > LIVE_CHECK_MS);
    if (!waiting.length) return;
    const mounts = await this.deps
      .admin()
      ?.listMounts()
      .catch(() => undefined);
    if (!mounts) return;
    const withSource = new Set(mounts.map((m) => m.mount));
    for (const service of waiting) if (!withSource.has(service.mount)) this.liveSources.delete(service.id);
  }

  /** Whether Icecast let go of the mount within `ms`. */
  private async released(mount: string, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (await this.hasSource(mount)) {
      if (Date.now() >= deadline) return false;
      await sleep(50);
    }
    return true;
  }

  private async hasSource(mount: string): Promise<boolean> {
    const mounts = await this.deps
      .admin()
      ?.listMounts()
      .catch(() => undefined);
    return mounts?.some((m) => m.mount === mount) ?? false;
  }

  async stop(serviceId: string): Promise<void> {
    const dj = this.running.get(serviceId);
    this.running.delete(serviceId);
    await dj?.stop();
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((id) => this.stop(id)));
  }

  private start(service: ServiceRow): void {
    const base = new URL(this.deps.icecastUrl());
    const dj = new AutoDj({
      sourceUrl: `icecast://${AUTODJ_USER}:${encodeURIComponent(service.source_password)}@${base.host}${service.mount}`,
      bitrateKbps: Number(service.limits.bitrate_kbps ?? 128),
      shuffle: service.shuffle,
      playlist: () => this.playlist(service.id),
      onTrack: async (track) => {
        const named = track.title
          ? { title: track.title, artist: track.artist ?? null }
          : { title: basename(track.path), artist: null };
        const artwork = await this.deps.media.artworkOf(service.id, basename(track.path)).catch(() => null);
        // Recorded before Icecast hears it: the stats poll then sees a title already playing, not a live change.
        await this.deps.nowPlaying
          ?.record(service.id, { ...named, source: 'autodj', artwork })
          .catch((err) => this.deps.log.warn({ err, service_id: service.id }, 'could not record what AutoDJ plays'));
        await this.deps
          .admin()
          ?.updateMetadata(service.mount, songText(named))
          .catch(() => false);
      },
    });
    dj.on('trackError', ({ path, error }) =>
      this.deps.log.warn({ service_id: service.id, path, err: error }, 'AutoDJ skipped a file'),
    );
    dj.on('encoderExited', ({ code, stderr }) => {
      // After stop() the encoder's exit is the plan, not news; what it printed says why (e.g. the mount was taken).
      if (dj.isRunning)
        this.deps.log.info({ service_id: service.id, code, stderr }, 'AutoDJ encoder exited; restarting');
    });
    dj.start();
    this.running.set(service.id, dj);
    this.deps.log.info({ service_id: service.id }, 'AutoDJ started');
  }

  /** The current playlist as file paths: the chosen order, or every uploaded file by name. */
  private async playlist(serviceId: string): Promise<string[]> {
    const [row] = await this.deps.db.query<{ playlist: string[] | null }>(
      'SELECT playlist FROM services WHERE id = $1',
      [serviceId],
    );
    const files = (await this.deps.media.list(serviceId)).map((f) => f.name);
    const chosen = (row?.playlist ?? []).filter((name) => files.includes(name));
    return (chosen.length ? chosen : files).map((name) => this.deps.media.pathOf(serviceId, name));
  }
}
