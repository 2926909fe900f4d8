import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../errors/index.js';
import type { Logger } from '../log/index.js';
import type {
  HlsFileServer,
  HlsPlaylistSettings,
  InternalListeners,
  ListenerAuthRequest,
} from '../provisioning/index.js';
import { admitListener, type InternalReaders, type ListenerPlaces, type ServiceRow } from '../services/index.js';
import type { Database } from '../store/index.js';
import { LivePlaylist, type PublishedPlaylist } from './live-playlist.js';
import { masterPlaylist, newForSession, parsePublished } from './playlist.js';
import { PlaylistFetchLog, type PlaylistFetch } from './playlist-fetch-log.js';
import { Rendition } from './rendition.js';
import { startSegmentServer, type SegmentServerSettings } from './segment-server.js';
import {
  PLAYLIST_BURST,
  PLAYLIST_INTERVAL_MS,
  refuseOverRate,
  sharedSession,
  takePlaylistFetch,
  tooFast,
} from './session-pace.js';
import { SessionLinks } from './session-links.js';
import { HlsSessions, presentMs, type HlsSession } from './sessions.js';
import { HlsSigner } from './signing.js';
import { HlsUsageTotals } from './usage-totals.js';
import { HLS_SEGMENTER_AGENT, HLS_SEGMENTER_USER } from './url.js';

export interface HlsManagerOptions {
  db: Database;
  /** Where renditions are written: DATA_DIR/hls/{service_id}/ */
  dir: string;
  /** Icecast's loopback address, undefined while it does not run. */
  icecastUrl: () => string | undefined;
  /** The streaming host whose services this instance serves (its HLS rows are cleared at start). */
  hostId: () => string;
  log: Logger;
  /** The host's listener places in memory, shared with Icecast's listeners; without it, admissions use the database. */
  places?: ListenerPlaces;
  /** False while this host's lease has run out (src/hosts/host-lease.ts): it then serves no HLS at all. */
  leaseHeld?: () => boolean;
  /** Where segments are served (segment-server.ts): nginx unless false. */
  segmentServer?: SegmentServerSettings;
  /** serve's own API address (…/api/v1): with it, nginx answers admitted sessions' media playlists too. */
  apiUrl?: () => string;
  /** Proxies whose X-Forwarded-For names the client (TRUSTED_PROXIES): nginx believes them too. */
  trustedProxies?: string[];
  /** How long a session that fetched nothing keeps its place (PRESENCE_MS unless given). */
  presenceMs?: number;
}

/** What nginx says of a media playlist request it passed on (hls-playlist-config.ts). */
export interface PassedOn {
  /** The client's address (serve sees nginx's). */
  ip?: string;
  /** nginx found the session fetching faster than one player. */
  overRate: boolean;
}

/** Who fetches: the listener session keeps its network and user agent, never the full address. */
export interface HlsClient {
  ip: string;
  userAgent: string;
}

/** A rendition nobody fetched for this long is stopped (started again by the next request). */
const RENDITION_IDLE_MS = 60_000;
/** How often the renditions' playlists are read and, when ffmpeg wrote a new one, published to nginx. */
const REFRESH_MS = 250;
/** How long a first request waits for the rendition's first segment. */
const READY_TIMEOUT_MS = 12_000;
/** A media playlist as answered to a session, with what it counts once sent. */
export interface MediaPlaylist {
  body: string;
  session: HlsSession;
  /** The size of the segments this playlist gives the session to fetch (newForSession). */
  segmentBytes: number;
  newest?: number;
}

/**
 * HLS for active services, on demand: the first request starts a rendition (rendition.ts), which stops when nobody
 * fetched for a minute or the service ends. Listener sessions take bought places like Icecast listeners and their
 * bytes and time are added to the usage (usage-totals.ts). Our segmenter reads the mount with a per-process secret,
 * so the decider lets it in without a place and the meter leaves it out (InternalReaders, InternalListeners).
 */
export class HlsManager implements InternalReaders, InternalListeners {
  private readonly secret = randomBytes(24).toString('base64url');
  private readonly renditions = new Map<string, Rendition>();
  /** Each running rendition's media playlist as sessions are answered it. */
  private readonly playlists = new Map<string, LivePlaylist>();
  private readonly sessions: HlsSessions;
  private readonly signer: HlsSigner;
  /** Tokens of sessions found shared (session-pace.ts), refused until their service ends: token → service. */
  private readonly shared = new Map<string, string>();
  readonly totals: HlsUsageTotals;
  /** Active services as the last life-cycle pass saw them (requests check their service here first). */
  private active = new Map<string, ServiceRow>();
  private timer?: NodeJS.Timeout;
  /** The last admission queued per service (see admit). */
  private readonly admissions = new Map<string, Promise<void>>();
  /** nginx serving the segments; undefined: serve answers them (hlsRoutes). */
  private fileServer?: HlsFileServer;
  /** While nginx answers admitted sessions' playlists: their links, its log of them, the secret it passes on. */
  private links?: SessionLinks;
  private fetchLog?: PlaylistFetchLog;
  private readonly gate = randomBytes(24).toString('base64url');
  private refreshTimer?: NodeJS.Timeout;
  private linksCleared = false;
  private revoking?: Promise<void>;

  constructor(private readonly options: HlsManagerOptions) {
    this.sessions = new HlsSessions(options.presenceMs);
    this.totals = new HlsUsageTotals(options.db, this.sessions, options.hostId);
    this.signer = new HlsSigner(options.db);
  }

  /** Clears the places HLS sessions of a previous run held, then ends idle sessions and renditions every second. */
  async start(): Promise<void> {
    await this.options.db.query(
      `DELETE FROM listeners WHERE client_id LIKE 'hls:%'
       AND service_id IN (SELECT id FROM services WHERE host_id = $1)`,
      [this.options.hostId()],
    );
    const sweep = () => {
      this.sweep().catch((err) => this.options.log.warn({ err }, 'HLS sweep failed'));
    };
    this.timer = setInterval(sweep, 1000);
    this.timer.unref();
    const playlists = await this.playlistSettings();
    this.fileServer = await startSegmentServer(
      this.options.dir,
      this.options.segmentServer,
      this.options.log,
      playlists,
    );
    if (!this.fileServer || !playlists) this.links = undefined;
    else {
      this.fetchLog = new PlaylistFetchLog(playlists.logPath);
      this.refreshTimer = setInterval(() => this.refresh(), REFRESH_MS);
      this.refreshTimer.unref();
    }
  }

  /** nginx's part in answering playlists: none without serve's address or without nginx. */
  private async playlistSettings(): Promise<HlsPlaylistSettings | undefined> {
    const api = this.options.apiUrl?.();
    if (!api || this.options.segmentServer === false) return undefined;
    const url = new URL(api);
    const host = ['0.0.0.0', '[::]'].includes(url.hostname)
      ? url.hostname === '[::]'
        ? '[::1]'
        : '127.0.0.1'
      : url.hostname;
    const base = dirname(this.options.dir);
    this.links = new SessionLinks(join(base, 'hls-sessions'), this.options.dir);
    await this.links.clear();
    return {
      sessionsDir: join(base, 'hls-sessions'),
      logPath: join(base, 'hls-file-server', 'playlists.log'),
      serve: { hostPort: `${host}:${url.port}`, prefix: url.pathname.replace(/\/+$/, '') },
      gateSecret: this.gate,
      ratePerSecond: 1000 / PLAYLIST_INTERVAL_MS,
      burst: PLAYLIST_BURST - 1,
      trustedProxies: this.options.trustedProxies ?? [],
    };
  }

  /** What nginx says of a request it passed on, when it is nginx (its secret): the client and its pace. */
  passedOn(gate: string | undefined, client: string | undefined, overRate: string | undefined): PassedOn | undefined {
    if (!gate || !this.links) return undefined;
    const [a, b] = [Buffer.from(gate), Buffer.from(this.gate)];
    if (a.length !== b.length || !timingSafeEqual(a, b)) return undefined;
    return { ip: client || undefined, overRate: overRate === '1' };
  }

  /**
   * The running renditions' playlists with sessions, published as soon as ffmpeg writes a new one; and the sessions
   * of a service that ended (stopped, expired, moved) ended with it, so that nginx stops answering them at once.
   */
  private refresh(): void {
    for (const [id, live] of this.playlists) if (this.sessions.hasAny(id)) live.get().catch(() => {});
    if (this.revoking) return;
    this.revoking = this.endSessionsOfEnded()
      .catch((err) => this.options.log.warn({ err }, 'HLS: ending the sessions of ended services failed'))
      .finally(() => {
        this.revoking = undefined;
      });
  }

  /** Services with sessions checked in memory (kept current by notifications); one not found there, in PostgreSQL. */
  private async endSessionsOfEnded(): Promise<void> {
    const now = Date.now();
    for (const id of this.sessions.serviceIds()) {
      const known = await this.options.places?.activeService(id);
      if (known && (!known.expires_at || known.expires_at.getTime() > now)) continue;
      // Only an answer that it ended ends them: a database that did not answer leaves them to the next check.
      const ended = await this.serviceFor(id, 'database').then(
        () => false,
        (err: unknown) => err instanceof ApiError && err.code === 'service_not_active',
      );
      if (!ended) continue;
      await this.endSessions(this.sessions.endIdle(now, (serviceId) => serviceId === id));
      await this.stopRendition(id);
    }
  }

  async stopAll(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.refreshTimer);
    await Promise.all([...this.renditions.keys()].map((id) => this.stopRendition(id)));
    await this.fileServer?.stop();
  }

  /** The segment server's process and address, while nginx serves them. */
  get segmentServer(): { pid?: number; url: string } | undefined {
    return this.fileServer && { pid: this.fileServer.pid, url: this.fileServer.publicUrl };
  }

  recognise(request: Pick<ListenerAuthRequest, 'user' | 'pass' | 'userAgent'>): 'ours' | 'impostor' | undefined {
    const { user, pass, userAgent } = request;
    if (user !== HLS_SEGMENTER_USER && !this.isInternalAgent(userAgent)) return undefined;
    const a = Buffer.from(pass);
    const b = Buffer.from(this.secret);
    const secretMatches = a.length === b.length && timingSafeEqual(a, b);
    const ours = user === HLS_SEGMENTER_USER && this.isInternalAgent(userAgent) && secretMatches;
    return ours ? 'ours' : 'impostor';
  }

  isInternalAgent(userAgent: string): boolean {
    return userAgent === HLS_SEGMENTER_AGENT;
  }

  connectedBytes(mount: string): number {
    let bytes = 0;
    for (const rendition of this.renditions.values()) {
      if (rendition.mount === mount) bytes += rendition.bytesFromIcecast;
    }
    return bytes;
  }

  /** Called on every life-cycle pass with the active services: the sessions and renditions of others end at once. */
  async sync(services: ServiceRow[]): Promise<void> {
    const active = new Map(services.filter((s) => s.status === 'active').map((s) => [s.id, s]));
    // A service bought while the pass ran is not in its list yet: only those the database confirms ended are.
    const known = new Set([...this.renditions.keys(), ...this.sessions.serviceIds()]);
    const unlisted = [...known].filter((id) => !active.has(id));
    const ended = new Set(unlisted);
    if (unlisted.length) {
      const stillLive = await this.options.db.query<{ id: string }>(
        `SELECT id FROM services WHERE id = ANY($1::text[]) AND status = 'active'
         AND (expires_at IS NULL OR expires_at > now())`,
        [unlisted],
      );
      for (const { id } of stillLive) ended.delete(id);
    }
    this.active = active;
    for (const id of ended) await this.stopRendition(id);
    for (const [token, id] of this.shared) if (ended.has(id)) this.shared.delete(token);
    await this.endSessions(this.sessions.endIdle(Date.now(), (id) => ended.has(id)));
  }

  /** The multivariant playlist: names the media playlist under a token signed for this service. Takes no place. */
  async master(serviceId: string): Promise<string> {
    const service = await this.serviceFor(serviceId);
    const base =
      this.links && this.fileServer ? `${this.fileServer.publicUrl}/hls/${encodeURIComponent(service.id)}/` : '';
    return masterPlaylist(await this.signer.token(service.id), Number(service.limits.bitrate_kbps ?? 128), base);
  }

  /** What a HEAD of the media playlist checks: the service is live and the token ours. No place, no rendition. */
  async checkSession(serviceId: string, token: string): Promise<void> {
    await this.checkToken(await this.serviceFor(serviceId), token);
  }

  /**
   * The session's media playlist: the only personal request, so the place is taken here (by a token we issued), at
   * one player's pace (session-pace.ts), and the rendition starts for an admitted listener only. Its segments are
   * listed under names shared by every listener; `segmentBytes` is what the session fetches from them.
   */
  async mediaPlaylist(serviceId: string, token: string, client: HlsClient, overRate = false): Promise<MediaPlaylist> {
    const service = await this.serviceFor(serviceId, 'memory');
    const known = this.sessions.get(token);
    // An open session's token was checked when it was admitted (a token is signed for one service).
    if (known?.serviceId !== service.id) await this.checkToken(service, token);
    if (this.shared.has(token)) throw sharedSession();
    const session = known ?? (await this.admit(service, token, client));
    await this.pace(session, overRate && known !== undefined);
    const playlist = await this.readyFor(service, session);
    // Its next fetches are nginx's to answer, while the session holds its place.
    await this.links?.open(service.id, token);
    const fresh = newForSession(playlist.numbers, session.newestShown);
    return {
      body: playlist.body,
      session,
      segmentBytes: fresh.reduce((sum, n) => sum + (playlist.sizes.get(n) ?? 0), 0),
      newest: playlist.numbers.at(-1),
    };
  }

  /** A segment by its published name: the same for every listener, so it carries no session and takes no place. */
  async segment(serviceId: string, name: string): Promise<Buffer> {
    const published = parsePublished(name);
    const tag = published && Buffer.from(await this.signer.segmentTag(serviceId, published.number));
    if (!published || !tag || !timingSafeEqual(tag, Buffer.from(published.tag))) {
      throw new ApiError(404, 'hls_segment_not_found', `No segment ${name}: take segment addresses from the playlist.`);
    }
    const service = await this.serviceFor(serviceId, 'pass');
    const rendition = this.renditions.get(service.id);
    const file = rendition && join(rendition.dir, `seg${published.number}.ts`);
    const body = file && (await readFile(file).catch(() => undefined));
    if (!rendition || !body) {
      throw new ApiError(
        404,
        'hls_segment_not_found',
        `Segment ${name} is no longer in the playlist: fetch the media playlist again and play its segments.`,
      );
    }
    rendition.lastUsedAt = Date.now();
    return body;
  }

  /** Counts a media playlist once written in full: its body and the segments it gave the session. */
  delivered(answer: MediaPlaylist, bytes: number): void {
    const { session, newest } = answer;
    this.sessions.seen(session, bytes + answer.segmentBytes);
    if (newest !== undefined) session.newestShown = Math.max(session.newestShown ?? newest, newest);
  }

  /**
   * Counts the playlists nginx answered since the last read: each keeps its session present and adds its body and
   * the segments it gave the session (the playlist it was answered is known by its ETag).
   */
  private async readFetches(): Promise<void> {
    for (const fetched of (await this.fetchLog?.read()) ?? []) this.countFetch(fetched);
  }

  private countFetch(f: PlaylistFetch): void {
    const session = this.sessions.get(f.token);
    if (session?.serviceId !== f.serviceId || (f.status !== 200 && f.status !== 304)) return;
    const rendition = this.renditions.get(f.serviceId);
    if (rendition) rendition.lastUsedAt = Date.now();
    const answered = f.status === 200 ? this.playlists.get(f.serviceId)?.answered(f.etag, f.at) : undefined;
    const fresh = answered ? newForSession(answered.numbers, session.newestShown) : [];
    const segmentBytes = fresh.reduce((sum, n) => sum + (answered?.sizes.get(n) ?? 0), 0);
    this.sessions.seen(session, f.bytes + segmentBytes, f.at);
    const newest = answered?.numbers.at(-1);
    if (newest !== undefined) session.newestShown = Math.max(session.newestShown ?? newest, newest);
  }

  /**
   * One player's pace; a session fetched faster again and again is shared: it ends and its token is refused. A fetch
   * nginx found too fast (`overRate`) is refused here: nginx keeps the pace of the fetches it answers itself.
   */
  private async pace(session: HlsSession, overRate: boolean): Promise<void> {
    const taken = overRate ? refuseOverRate(session) : takePlaylistFetch(session);
    if (taken === 'ok') return;
    if (taken === 'wait') throw tooFast(session);
    this.shared.set(session.token, session.serviceId);
    const ended = this.sessions.end(session.token);
    if (ended) await this.endSessions([ended]);
    this.options.log.info({ service_id: session.serviceId }, 'HLS session shared by several players: ended');
    throw sharedSession();
  }

  private async checkToken(service: ServiceRow, token: string): Promise<void> {
    if (await this.signer.tokenValid(service.id, token)) return;
    throw new ApiError(
      400,
      'hls_session_invalid',
      "This address lacks a session issued for this stream: start from the service's hls_url (index.m3u8).",
    );
  }

  /** The rendition's playlist; a session admitted by this request gives its place back if there is none. */
  private async readyFor(service: ServiceRow, session: HlsSession): Promise<PublishedPlaylist> {
    try {
      // A session waiting here for the rendition's first segment is fetching: not ended as idle meanwhile.
      return await this.ready(service, () => this.sessions.seen(session, 0));
    } catch (err) {
      const ended = session.newestShown === undefined ? this.sessions.end(session.token) : undefined;
      if (ended) await this.endSessions([ended]);
      throw err;
    }
  }

  /**
   * The service if it is live. The multivariant playlist reads it from the database. Media playlists (a player's
   * every few seconds) read the host's listener places in memory, which PostgreSQL's notifications keep current, so
   * a stop shows there too; segments (served here without nginx) may use the last life-cycle pass's view, a second
   * old at most: without a playlist a player fetches none for long. Expiry is the clock's.
   */
  private async serviceFor(serviceId: string, from: 'database' | 'memory' | 'pass' = 'database'): Promise<ServiceRow> {
    // Answered without PostgreSQL, which a host without its lease may not reach: the service may have moved.
    if (this.options.leaseHeld && !this.options.leaseHeld()) throw leaseLost(serviceId);
    const known =
      from === 'pass'
        ? this.active.get(serviceId)
        : from === 'memory'
          ? await this.options.places?.activeService(serviceId)
          : undefined;
    if (known && (!known.expires_at || known.expires_at.getTime() > Date.now())) return known;
    const [row] = await this.options.db.query<ServiceRow & Record<string, unknown>>(
      'SELECT * FROM services WHERE id = $1',
      [serviceId],
    );
    if (!row) {
      throw new ApiError(
        404,
        'service_not_found',
        `No service ${serviceId}: check the hls_url in the service record (GET /services/{service_id}).`,
      );
    }
    const live = row.status === 'active' && (!row.expires_at || row.expires_at.getTime() > Date.now());
    if (!live) throw ended(row.status === 'active' ? 'expired' : row.status);
    return row;
  }

  /** The rendition's media playlist, starting the rendition if it does not run and waiting for its first segment. */
  private async ready(service: ServiceRow, waiting: () => void): Promise<PublishedPlaylist> {
    const { rendition, live } = this.renditionOf(service);
    rendition.lastUsedAt = Date.now();
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const playlist = await live.get();
      if (playlist) return playlist;
      if (Date.now() > deadline) break;
      waiting();
      await sleep(200);
    }
    const message = 'The stream has no audio to segment yet (is its source connected?); retry in a few seconds.';
    throw new ApiError(503, 'hls_not_ready', message, {
      retryable: true,
      retryAfterSeconds: 3,
    });
  }

  private renditionOf(service: ServiceRow): { rendition: Rendition; live: LivePlaylist } {
    const running = this.renditions.get(service.id);
    const live = this.playlists.get(service.id);
    if (running && live) return { rendition: running, live };
    const icecastUrl = this.options.icecastUrl();
    if (!icecastUrl) {
      const message = 'Streaming is not running on this host right now; retry shortly.';
      throw new ApiError(503, 'streaming_unavailable', message, { retryable: true });
    }
    const rendition = new Rendition(
      join(this.options.dir, service.id),
      {
        icecastUrl,
        mount: service.mount,
        secret: this.secret,
        bitrateKbps: Number(service.limits.bitrate_kbps ?? 128),
      },
      this.options.log,
    );
    const playlist = new LivePlaylist(rendition, {
      tagOf: (n) => this.signer.segmentTag(service.id, n),
      base: this.fileServer ? `${this.fileServer.publicUrl}/hls/${encodeURIComponent(service.id)}/` : '',
      link: this.fileServer !== undefined,
      write: this.links !== undefined,
    });
    this.renditions.set(service.id, rendition);
    this.playlists.set(service.id, playlist);
    this.options.log.info({ service_id: service.id }, 'HLS rendition started');
    return { rendition, live: playlist };
  }

  /**
   * Admissions of one service lock its row in turn anyway: queued here, a burst of players (a link shared at once)
   * waits in memory for its turn instead of holding every database connection of the pool while it waits.
   */
  private admit(service: ServiceRow, token: string, client: HlsClient): Promise<HlsSession> {
    const turn = (this.admissions.get(service.id) ?? Promise.resolve()).then(() =>
      this.admitNow(service, token, client),
    );
    const settled = turn.then(
      () => {},
      () => {},
    );
    this.admissions.set(service.id, settled);
    void settled.then(() => {
      if (this.admissions.get(service.id) === settled) this.admissions.delete(service.id);
    });
    return turn;
  }

  private async admitNow(service: ServiceRow, token: string, client: HlsClient): Promise<HlsSession> {
    const session = { userAgent: client.userAgent, protocol: 'hls' } as const;
    const { places, db } = this.options;
    const admitted = places
      ? await places.admit({ serviceId: service.id }, `hls:${token}`, client.ip, session)
      : await admitListener(db, { serviceId: service.id }, `hls:${token}`, client.ip, session);
    if (!admitted.accept && !admitted.service) throw ended(service.status === 'active' ? 'ended' : service.status);
    if (!admitted.accept) {
      const retry = { retryable: true, retryAfterSeconds: 10 };
      throw new ApiError(403, 'listener_limit_reached', admitted.message, retry);
    }
    return this.sessions.get(token) ?? this.sessions.open(token, service.id);
  }

  /** Ends sessions not seen within twice the segment length (their places are freed) and idle renditions. */
  private async sweep(): Promise<void> {
    await this.readFetches();
    await this.unlinkWithoutLease();
    await this.endSessions(this.sessions.endIdle());
    for (const [id, rendition] of this.renditions) {
      const idle = !this.sessions.hasAny(id) && Date.now() - rendition.lastUsedAt > RENDITION_IDLE_MS;
      if (idle) await this.stopRendition(id);
    }
  }

  /** A host without its lease serves no HLS: nginx's links go until it is back (serve answers meanwhile). */
  private async unlinkWithoutLease(): Promise<void> {
    const held = !this.options.leaseHeld || this.options.leaseHeld();
    if (held || !this.links) this.linksCleared = false;
    else if (!this.linksCleared) {
      this.linksCleared = true;
      await this.links.clear();
    }
  }

  private async endSessions(ended: HlsSession[]): Promise<void> {
    if (!ended.length) return;
    // nginx stops answering them first: their next fetch reaches serve.
    if (this.links) await Promise.all(ended.map((s) => this.links!.close(s.serviceId, s.token)));
    const clientIds = ended.map((s) => `hls:${s.token}`);
    // The owner's session statistics get each session's exact bytes and the listening time the usage counts
    // (presentMs); deleting its place would close the session with the idle wait in it.
    await this.options.db.query(
      `UPDATE listener_sessions ls SET bytes = ended.bytes, duration_seconds = round(ended.ms / 1000.0),
         ended_at = ls.started_at + make_interval(secs => ended.ms / 1000.0)
         FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS ended (client_id, bytes, ms)
        WHERE ls.client_id = ended.client_id AND ls.ended_at IS NULL`,
      [clientIds, ended.map((s) => s.bytes), ended.map((s) => Math.round(presentMs(s)))],
    );
    const { places } = this.options;
    if (!places) {
      await this.options.db.query('DELETE FROM listeners WHERE client_id = ANY($1::text[])', [clientIds]);
      return;
    }
    for (const serviceId of new Set(ended.map((s) => s.serviceId)))
      await places.release(
        { serviceId },
        ended.filter((s) => s.serviceId === serviceId).map((s) => `hls:${s.token}`),
      );
  }

  private async stopRendition(serviceId: string): Promise<void> {
    const rendition = this.renditions.get(serviceId);
    this.renditions.delete(serviceId);
    this.playlists.delete(serviceId);
    await this.links?.closeService(serviceId);
    if (!rendition) return;
    await rendition.stop();
    this.options.log.info({ service_id: serviceId }, 'HLS rendition stopped');
  }
}

function ended(status: string): ApiError {
  return new ApiError(
    410,
    'service_not_active',
    `This stream has ended (the service is ${status}); its owner can extend it or buy a new one.`,
  );
}

function leaseLost(serviceId: string): ApiError {
  return new ApiError(
    503,
    'host_lease_lost',
    'This streaming host lost touch with the pool and serves nothing until it is back. Retry in a few seconds, or ' +
      `read the service record (GET /services/${serviceId}) for where its stream is served now.`,
    { retryable: true, retryAfterSeconds: 5 },
  );
}
