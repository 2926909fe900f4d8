import type { ChildProcess } from 'node:child_process';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Logger } from '../log/index.js';
import { hasAutoDj } from '../services/has-autodj.js';
import type { IcecastAdmin, MountSummary } from '../provisioning/index.js';
import type { Database } from '../store/index.js';
import { startCapture, streamFormatOf } from './capture.js';
import { type PlayedTitle, type Recording, RecordingStore, SETTING_SQL } from './recording-store.js';
import { removeShowFiles, ShowParts } from './show-parts.js';
import { cutTornFrame } from './whole-frames.js';
import { type IncludedStorage, recordingStorageBytes, storageProblem } from './storage.js';

export const RECORDER_USER = 'recorder';
export const RECORDER_AGENT = 'agent-audio-api-recorder/1';

export interface RecorderOptions {
  db: Database;
  log: Logger;
  hostId: () => string;
  admin: () => IcecastAdmin | undefined;
  /** The local Icecast's address (loopback), where the recorder reads mounts. */
  icecastUrl: () => string | undefined;
  /** Where a service's media file of this name is (shared by every host). */
  pathOf: (serviceId: string, name: string) => string;
  /** Who holds the mounts of services with AutoDJ: their shows are recorded while the live encoder does. */
  autodj?: { isLive(serviceId: string): boolean };
  /** The recording storage each product includes (the catalog's). */
  included: IncludedStorage;
  /** Hours an expired service may still be extended: its recordings are kept until then. */
  graceHours: () => number;
  /** A show goes on after a source drop shorter than this. */
  gapSeconds?: number;
  intervalMs?: number;
  /** How often recordings of services over for good are looked for (a pass's interval at the least). */
  cleanupIntervalMs?: number;
}

interface RecordedService extends Record<string, unknown> {
  id: string;
  product_id: string;
  mount: string;
  limits: Record<string, unknown>;
}

interface Capture {
  child: ChildProcess;
  mount: string;
  /** The file's size when this session began, and now. */
  sizeAtStart: number;
  /** The show's bytes in files of hosts that recorded it before this one. */
  partsBytes: number;
  size: number;
  show: Recording;
  file: string;
  titles: PlayedTitle[];
  exited: Promise<void>;
}

/**
 * Records the live shows of this host's services that record: while the owner's source holds a mount, ffmpeg reads
 * it from the local Icecast as our own listener (recognised by the decider, not counted) and appends the packets to
 * the show's file. A source back within the gap continues the show; after it, the show ends and its duration is
 * measured. Recordings of services over for good are deleted.
 */
export class Recorder {
  readonly store: RecordingStore;
  private readonly parts: ShowParts;
  private readonly secret = randomBytes(24).toString('base64url');
  private readonly captures = new Map<string, Capture>();
  /** Services whose capture ended lately: not restarted at once (the mount may still be listed a moment). */
  private readonly restDue = new Map<string, number>();
  /** Services whose show being recorded was deleted: the next show begins with their next source. */
  private readonly deletedLive = new Set<string>();
  private timer?: NodeJS.Timeout;
  private passes = 0;
  private running?: Promise<void>;

  constructor(private readonly options: RecorderOptions) {
    this.store = new RecordingStore(options.db);
    this.parts = new ShowParts(options.db, options.pathOf);
  }

  /** Shows this host was recording when it stopped are paused: a source back within the gap continues them. */
  async start(): Promise<void> {
    await this.options.db.query(
      'UPDATE recordings SET paused_at = coalesce(paused_at, now()) WHERE host_id = $1 AND ended_at IS NULL',
      [this.options.hostId()],
    );
    this.timer = setInterval(() => {
      this.running ??= this.pass()
        .catch((err) => this.options.log.warn({ err }, 'recording pass failed'))
        .finally(() => {
          this.running = undefined;
        });
    }, this.options.intervalMs ?? 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
    await Promise.all([...this.captures.values()].map((c) => this.endCapture(c)));
  }

  recognise(request: { user: string; pass: string; userAgent: string }): 'ours' | 'impostor' | undefined {
    if (request.user !== RECORDER_USER && !this.isInternalAgent(request.userAgent)) return undefined;
    const a = Buffer.from(request.pass);
    const b = Buffer.from(this.secret);
    const ours = request.user === RECORDER_USER && this.isInternalAgent(request.userAgent) && a.length === b.length;
    return ours && timingSafeEqual(a, b) ? 'ours' : 'impostor';
  }

  isInternalAgent(userAgent: string): boolean {
    return userAgent === RECORDER_AGENT;
  }

  /** What the capture of this mount read in its source session (about what it wrote: the packets are copied). */
  connectedBytes(mount: string): number {
    let bytes = 0;
    for (const c of this.captures.values()) if (c.mount === mount) bytes += c.size - c.sizeAtStart;
    return bytes;
  }

  /**
   * One look at what should record and what does. Icecast's mounts are asked for only while a service here records,
   * and shows are paused or ended only while one was open when the pass began (a show this pass opens has nothing to
   * end yet): a host that records nothing spends one statement a pass.
   */
  async pass(): Promise<void> {
    const { wanted, openShows } = await this.look();
    if (wanted.size || this.captures.size || this.deletedLive.size) await this.record(wanted);
    if (openShows) {
      if (await this.store.pauseLost()) this.options.log.info({}, 'shows of a lost host paused');
      await this.finishShows();
    }
    if (this.passes++ % this.passesPerCleanup() === 0) await this.removeEnded();
  }

  private passesPerCleanup(): number {
    return Math.max(1, Math.round((this.options.cleanupIntervalMs ?? 60_000) / (this.options.intervalMs ?? 1000)));
  }

  private async record(wanted: Map<string, RecordedService>): Promise<void> {
    const admin = this.options.admin();
    const mounts = admin ? await admin.listMounts().catch(() => [] as MountSummary[]) : [];
    const live = new Map(mounts.map((m) => [m.mount, m]));
    for (const [id, capture] of this.captures) {
      if (!wanted.has(id)) await this.endCapture(capture);
    }
    for (const id of this.deletedLive) if (!live.has(wanted.get(id)?.mount ?? '')) this.deletedLive.delete(id);
    for (const service of wanted.values()) {
      const mount = live.get(service.mount);
      if (this.deletedLive.has(service.id)) continue;
      if (mount && !this.captures.has(service.id) && this.liveHolds(service)) await this.begin(service, mount);
    }
    for (const capture of this.captures.values()) await this.follow(capture, wanted.get(capture.show.service_id)!);
  }

  /**
   * The services of this host that should record, and whether any host has a show not ended (recordings_open indexes
   * them), in one statement: a row of its own, without a service, carries the latter.
   */
  private async look(): Promise<{ wanted: Map<string, RecordedService>; openShows: boolean }> {
    const rows = await this.options.db.query<RecordedService & { open_shows: boolean | null }>(
      `SELECT s.id, s.product_id, s.mount, s.limits, NULL::boolean AS open_shows
         FROM services s LEFT JOIN recording_settings rs ON rs.service_id = s.id
        WHERE s.host_id = $1 AND s.status = 'active' AND (s.expires_at IS NULL OR s.expires_at > now())
          AND ${SETTING_SQL}
       UNION ALL
       SELECT NULL, NULL, NULL, NULL, EXISTS (SELECT 1 FROM recordings WHERE ended_at IS NULL)`,
      [this.options.hostId()],
    );
    const wanted = new Map<string, RecordedService>();
    for (const { id, product_id, mount, limits } of rows)
      if (id !== null) wanted.set(id, { id, product_id, mount, limits });
    return { wanted, openShows: rows.some((r) => r.open_shows === true) };
  }

  private async begin(service: RecordedService, mount: MountSummary): Promise<void> {
    const base = this.options.icecastUrl();
    const format = streamFormatOf(mount.contentType);
    if (!base || !format || (this.restDue.get(service.id) ?? 0) > Date.now()) return;
    if (storageProblem(this.bought(service), await this.store.usedBytes(service.id))) return;
    await this.parts.takeOver(service.id, this.options.hostId());
    const show = await this.store.openShow(service.id, this.options.hostId(), format.contentType, format.extension);
    const partsBytes = await this.parts.partsBytes(show.id);
    const file = this.options.pathOf(service.id, show.file_name);
    await mkdir(dirname(file), { recursive: true });
    // The session before may have ended inside a frame (its source hung up, or this host was lost while it wrote).
    await cutTornFrame(file, format.extension);
    const source = { url: new URL(service.mount, base).href, user: RECORDER_USER, secret: this.secret };
    const child = startCapture({ ...source, userAgent: RECORDER_AGENT }, format, file);
    let said = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      said = (said + chunk.toString()).slice(-400);
    });
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const size = await sizeOf(file);
    const capture: Capture = {
      child,
      mount: service.mount,
      sizeAtStart: size,
      partsBytes,
      size,
      show,
      file,
      titles: show.titles,
      exited,
    };
    this.captures.set(service.id, capture);
    void exited.then(() => this.captureEnded(capture, said));
    this.options.log.info({ service_id: service.id, recording_id: show.id }, 'recording a live show');
  }

  private async captureEnded(capture: Capture, said: string): Promise<void> {
    if (this.captures.get(capture.show.service_id) === capture) this.captures.delete(capture.show.service_id);
    this.restDue.set(capture.show.service_id, Date.now() + 2000);
    await this.store
      .paused(capture.show.id, this.options.hostId(), capture.partsBytes + (await sizeOf(capture.file)))
      .catch((err) => this.options.log.warn({ err }, 'could not pause a recording'));
    if (said.trim()) this.options.log.debug?.({ recording_id: capture.show.id, ffmpeg: said.trim() }, 'capture ended');
  }

  private async endCapture(capture: Capture): Promise<void> {
    capture.child.kill('SIGTERM');
    await capture.exited;
  }

  /** Keeps the show's size and titles current; stops it when the storage bought is full. */
  private async follow(capture: Capture, service: RecordedService): Promise<void> {
    const size = await sizeOf(capture.file);
    capture.size = size;
    capture.titles = await this.titlesSince(capture);
    const hostId = this.options.hostId();
    const fence = await this.parts.grew(capture.show.id, hostId, capture.partsBytes + size, capture.titles);
    if (fence === 'moved') return this.endCapture(capture);
    if (fence === 'deleted') {
      this.deletedLive.add(service.id);
      await this.endCapture(capture);
      return this.parts.removeFiles(service.id, capture.show.id);
    }
    if (!storageProblem(this.bought(service), await this.store.usedBytes(service.id))) return;
    await this.store.noteStop(capture.show.id, 'storage_full');
    this.options.log.info({ recording_id: capture.show.id }, 'recording stopped: storage full');
    await this.endCapture(capture);
  }

  /** Whether the owner's live encoder holds the mount (with AutoDJ, it does only while it is live). */
  private liveHolds(service: RecordedService): boolean {
    return !hasAutoDj(service) || (this.options.autodj?.isLive(service.id) ?? false);
  }

  private bought(service: RecordedService): number {
    return recordingStorageBytes(service, this.options.included);
  }

  private async titlesSince(capture: Capture): Promise<PlayedTitle[]> {
    const rows = await this.options.db.query<{ title: string; artist: string | null; started_at: Date }>(
      `SELECT title, artist, started_at FROM now_playing WHERE service_id = $1 AND started_at >= $2 ORDER BY id`,
      [capture.show.service_id, capture.show.started_at],
    );
    const known = new Set(capture.titles.map((t) => t.started_at));
    const added = rows
      .map((r) => ({ title: r.title, artist: r.artist, started_at: r.started_at.toISOString() }))
      .filter((t) => !known.has(t.started_at));
    return [...capture.titles, ...added];
  }

  /** Shows paused for longer than the gap are over: their duration is measured from the file. */
  private async finishShows(): Promise<void> {
    for (const show of await this.store.overShows(this.options.gapSeconds ?? 60)) {
      if (this.captures.get(show.service_id)?.show.id === show.id) continue;
      const ended = await this.parts.finish(show.id, this.options.hostId());
      if (ended) this.options.log.info({ recording_id: show.id, bytes: ended.sizeBytes }, 'recorded show ended');
    }
  }

  private async removeEnded(): Promise<void> {
    for (const item of await this.store.ofEndedServices(this.options.graceHours())) {
      await removeShowFiles(this.options.pathOf, item.service_id, item.id);
      await this.store.remove(item.service_id, item.id);
    }
  }
}

const sizeOf = (file: string) =>
  stat(file).then(
    (s) => s.size,
    () => 0,
  );
