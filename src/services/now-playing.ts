import { recordEvent } from '../events/index.js';
import type { IcecastAdmin, MountStats } from '../provisioning/index.js';
import type { Client, Database } from '../store/index.js';

export type TrackSource = 'autodj' | 'live' | 'owner';

export interface Track {
  title: string;
  artist: string | null;
  source: TrackSource;
  started_at: string;
}

export interface NewTrack {
  title: string;
  artist?: string | null;
  source: TrackSource;
  /** The name of the file's cover picture (AutoDJ's tracks; live sources send titles only). */
  artwork?: string | null;
}

/** A track with the name of its cover picture, as the listen page shows it. */
export interface PlayedTrack extends Track {
  artwork: string | null;
}

/** How many tracks a service keeps (and shows as its history). */
export const TRACK_HISTORY = 20;
/**
 * track.changed is sent at most once per this window per service: a change within it is sent when the window ends,
 * the latest title only (the changes between are in the history, not in events).
 */
export const TRACK_EVENT_WINDOW_MS = 5000;
/**
 * The track.changed events a service keeps: older ones are deleted (with their finished webhook deliveries). A reader
 * that resumes from one of them gets the service's events from the oldest kept.
 */
export const TRACK_EVENT_HISTORY = 200;
const MAX_TEXT = 300;
const TRACK_COLUMNS = 'title, artist, source, started_at';
const LATEST_TRACKS = `SELECT ${TRACK_COLUMNS} FROM now_playing WHERE service_id = $1 ORDER BY id DESC LIMIT $2`;

interface TrackRow {
  title: string;
  artist: string | null;
  source: TrackSource;
  started_at: Date;
}

const trackOf = (row: TrackRow): Track => ({
  title: row.title,
  artist: row.artist,
  source: row.source,
  started_at: row.started_at.toISOString(),
});

/** How a track reads as one line (Icecast's "Artist - Title" song text). */
export function songText(track: { title: string; artist?: string | null }): string {
  return [track.artist, track.title].filter(Boolean).join(' - ');
}

const clean = (text: string) =>
  text
    .replace(/[\u0000-\u001f\u007f]/g, ' ')
    .trim()
    .slice(0, MAX_TEXT);

export interface NowPlayingOptions {
  /** Icecast's admin API: a title the owner sets reaches listeners' players too (ICY metadata). */
  admin?: () => IcecastAdmin | undefined;
  /** The owner's title last sent to each mount of this host, kept with the host reconciler's (which then skips it). */
  titlesSent?: Map<string, string>;
  eventWindowMs?: number;
  /** The host whose Icecast observe() reads: only titles of services placed on it are taken. */
  hostId?: () => string;
}

/**
 * What each service plays now and played before (the last TRACK_HISTORY tracks). A change is stored at once; its event
 * track.changed goes in the same transaction unless the service had one less than TRACK_EVENT_WINDOW_MS ago: then a
 * timer sends the latest track when the window ends (on whichever instance set it; a crash meanwhile leaves it to the
 * next change). The same track told again (the next stats poll, AutoDJ's own metadata coming back through Icecast) is
 * not a change.
 */
export class NowPlaying {
  /** The title last seen in Icecast's stats per mount: only a change of it is news (a poll may be older than a PUT). */
  private readonly seen = new Map<string, string>();
  /** Services whose latest track waits for the end of their event window, by service id. */
  private readonly trailing = new Map<string, NodeJS.Timeout>();

  private readonly admin: () => IcecastAdmin | undefined;
  private readonly eventWindowMs: number;

  constructor(
    private readonly db: Database,
    private readonly options: NowPlayingOptions = {},
  ) {
    this.admin = options.admin ?? (() => undefined);
    this.eventWindowMs = options.eventWindowMs ?? TRACK_EVENT_WINDOW_MS;
  }

  /**
   * The owner's title (PUT now-playing), also sent to the mount so players that read ICY metadata show it: by this
   * instance when it runs the service's Icecast, else by the service's host when woken.
   */
  async setByOwner(service: { id: string; mount: string }, track: Omit<NewTrack, 'source'>): Promise<Track> {
    const added = await this.record(service.id, { ...track, source: 'owner' });
    // The service's own host sends it to its mount (src/hosts/host-reconciler.ts), wherever this request landed.
    await this.db.query(
      "SELECT pg_notify('host_services', host_id) FROM services WHERE id = $1 AND host_id IS NOT NULL",
      [service.id],
    );
    const song = songText(track);
    if (
      await this.admin()
        ?.updateMetadata(service.mount, song)
        .catch(() => false)
    ) {
      this.options.titlesSent?.set(service.mount, song);
    }
    return added ?? (await this.current(service.id))!;
  }

  async current(serviceId: string): Promise<Track | null> {
    return (await this.history(serviceId, 1))[0] ?? null;
  }

  async history(serviceId: string, limit = TRACK_HISTORY): Promise<Track[]> {
    const rows = await this.db.query<TrackRow & Record<string, unknown>>(LATEST_TRACKS, [serviceId, limit]);
    return rows.map(trackOf);
  }

  /** The history with each track's cover picture. */
  async played(serviceId: string, limit = TRACK_HISTORY): Promise<PlayedTrack[]> {
    const rows = await this.db.query<TrackRow & { artwork_name: string | null } & Record<string, unknown>>(
      `SELECT ${TRACK_COLUMNS}, artwork_name FROM now_playing WHERE service_id = $1 ORDER BY id DESC LIMIT $2`,
      [serviceId, limit],
    );
    return rows.map((row) => ({ ...trackOf(row), artwork: row.artwork_name }));
  }

  /** Records a new track; returns it, or null when it is the one already playing. */
  async record(serviceId: string, track: NewTrack): Promise<Track | null> {
    const title = clean(track.title);
    const artist = track.artist ? clean(track.artist) || null : null;
    if (!title) return null;
    return this.db.transaction(async (client) => {
      await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [serviceId]);
      const {
        rows: [playing],
      } = (await client.query(LATEST_TRACKS, [serviceId, 1])) as { rows: TrackRow[] };
      if (playing && songText(playing) === songText({ title, artist })) return null;
      const {
        rows: [row],
      } = await client.query(
        `INSERT INTO now_playing (service_id, title, artist, source, artwork_name) VALUES ($1, $2, $3, $4, $5)
         RETURNING ${TRACK_COLUMNS}`,
        [serviceId, title, artist, track.source, track.artwork ?? null],
      );
      await client.query(
        `DELETE FROM now_playing WHERE service_id = $1 AND id < (SELECT min(id) FROM (
           SELECT id FROM now_playing WHERE service_id = $1 ORDER BY id DESC LIMIT ${TRACK_HISTORY}) kept)`,
        [serviceId],
      );
      const added = trackOf(row as TrackRow);
      const waitMs = await this.announce(client, serviceId, added, playing ? songText(playing) : null);
      if (waitMs > 0) this.later(serviceId, waitMs);
      return added;
    });
  }

  /**
   * Records track.changed for `track` unless the service's last one is younger than the window; returns how long
   * until the window ends then (0 when recorded, or when the last one already told this track). Under the service's lock.
   */
  private async announce(
    client: Pick<Client, 'query'>,
    serviceId: string,
    track: Track,
    playing: string | null,
  ): Promise<number> {
    const {
      rows: [last],
    } = (await client.query(
      `SELECT data->>'title' AS title, data->>'artist' AS artist,
              greatest(0, $2 - extract(epoch FROM clock_timestamp() - created_at) * 1000)::float8 AS wait_ms
         FROM events WHERE service_id = $1 AND type = 'track.changed' ORDER BY seq DESC LIMIT 1`,
      [serviceId, this.eventWindowMs],
    )) as { rows: Array<{ title: string | null; artist: string | null; wait_ms: number }> };
    const told = last?.title ? songText({ title: last.title, artist: last.artist }) : undefined;
    if (told === songText(track)) return 0;
    if (last && last.wait_ms > 0) return Math.ceil(last.wait_ms);
    await recordEvent(client, { type: 'track.changed', serviceId, data: { ...track, previous: told ?? playing } });
    await client.query(
      `DELETE FROM webhook_deliveries WHERE state <> 'pending' AND event_seq IN (
         SELECT seq FROM events WHERE service_id = $1 AND type = 'track.changed' ORDER BY seq DESC OFFSET $2)`,
      [serviceId, TRACK_EVENT_HISTORY],
    );
    await client.query(
      `DELETE FROM events WHERE seq IN (
         SELECT seq FROM events WHERE service_id = $1 AND type = 'track.changed' ORDER BY seq DESC OFFSET $2)
         AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = events.seq)`,
      [serviceId, TRACK_EVENT_HISTORY],
    );
    return 0;
  }

  /** Sends the service's latest track when its window ends (once per service, however many changes came meanwhile). */
  private later(serviceId: string, waitMs: number): void {
    if (this.trailing.has(serviceId)) return;
    const timer = setTimeout(() => {
      this.trailing.delete(serviceId);
      this.db
        .transaction(async (client) => {
          await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [serviceId]);
          const {
            rows: [latest],
          } = (await client.query(LATEST_TRACKS, [serviceId, 1])) as { rows: TrackRow[] };
          return latest ? this.announce(client, serviceId, trackOf(latest), null) : 0;
        })
        .then((again) => {
          if (again > 0) this.later(serviceId, again);
        })
        .catch(() => {}); // the database is going away (shutdown): the next change sends it
    }, waitMs + 20);
    timer.unref();
    this.trailing.set(serviceId, timer);
  }

  /**
   * The titles Icecast reports per mount (a live encoder's metadata update, ICY or updinfo): a title that differs from
   * what plays now is a new live track. AutoDJ's own titles come back the same way and are not a change. Only the
   * mounts of services placed on this host count: a host that froze and wakes after its service moved still lists
   * the mount with its old title, which is not news (it would be told again after the new host's titles).
   */
  async observe(stats: MountStats[]): Promise<void> {
    const titled = stats.filter((s) => s.title && s.title !== this.seen.get(s.mount));
    if (!titled.length) return;
    const services = await this.db.query<{ id: string; mount: string }>(
      `SELECT id, mount FROM services WHERE mount = ANY($1) AND status = 'active'
         AND ($2::text IS NULL OR host_id = $2)`,
      [titled.map((s) => s.mount), this.options.hostId?.() ?? null],
    );
    // A title counts as seen once it is recorded: a write that fails is tried again on the next poll, not lost.
    for (const s of titled)
      if (!services.some((service) => service.mount === s.mount)) this.seen.set(s.mount, s.title!);
    for (const service of services) {
      const title = titled.find((s) => s.mount === service.mount)!.title!;
      if (!(await this.sentByUs(service.id, clean(title))))
        await this.record(service.id, { ...splitSong(title), source: 'live' });
      this.seen.set(service.mount, title);
    }
  }

  /**
   * Whether a title Icecast reports is what plays now, or one this service sent to its mount itself (the owner's or
   * AutoDJ's, still in the history): stats read just before a newer title was set, or the last owner's title that the
   * new host gives a moved mount, are echoes, not a live track.
   */
  private async sentByUs(serviceId: string, song: string): Promise<boolean> {
    const [playing, ...before] = await this.history(serviceId);
    if (!playing || songText(playing) === song) return Boolean(playing);
    return before.some((track) => track.source !== 'live' && songText(track) === song);
  }
}

/** "Artist - Title" as encoders send it; a title alone stays whole. */
function splitSong(song: string): { title: string; artist: string | null } {
  const at = song.indexOf(' - ');
  return at > 0 ? { artist: song.slice(0, at), title: song.slice(at + 3) } : { title: song, artist: null };
}
