// Per-mount usage counters that survive source reconnects and restarts of our process.
//
// Icecast's /admin/stats counters (total_bytes_sent/read) belong to one source session: they start at 0
// when a source connects and vanish with it, and Icecast refreshes them every 5 s (at stream_start + 5 k s).
// The meter adds up per-session deltas, so its totals only grow. What a source sent after the last refresh
// of its session is never reported by Icecast. The proxy that carried the source (front door or HAProxy) reports
// the exact bytes of its connection when it closes (sourceEnded): that figure is the session's total. Without it,
// when the session ends, the meter adds the unreported part as the session's last measured rate × the time from
// that refresh to the end (the end is placed between the last poll that saw the source and the first that did not).
//
// Bytes sent to listeners: with an access log, the exact bytes of every finished listener (its log line) plus,
// while listeners are connected (or a gone listener's line waits for HAProxy's count), the session's stats counter
// minus what its finished listeners took (when the source goes, what those still connected took stands until their
// lines come: a cut does not lower the count). Behind HAProxy a finished listener's figure is HAProxy's bytes sent to
// it (listenerEnded): Icecast's line counts what it wrote to HAProxy, tens of KB more than reached the listener when it
// left. Such a line waits a few seconds for that report.
//
// Listener time comes from the access log (exact whole seconds per finished listener) plus the
// `Connected` seconds of listeners still connected (listclients). Without an access log the meter
// integrates listeners × time between polls instead.
//
// State is plain JSON (toJSON / the `state` option), including the access-log position, so persisting
// it in one write keeps counters and log position consistent.

import { AccessLogReader, type AccessLogEntry, type AccessLogPosition } from './access-log.js';
import type { IcecastAdmin, ListenerInfo, MountStats } from './icecast-admin.js';
import { placeKey, type ListenerEnd } from './listener-end.js';
import type { SourceEnd } from './source-end.js';

export interface MountSnapshot {
  mount: string;
  /** Listeners now (listclients when polled, else the stats count). */
  listeners: number;
  /** Highest listener count seen (ours and Icecast's listener_peak), across sessions. */
  peakListeners: number;
  /** Finished listeners' seconds (access log) + connected listeners' seconds so far. */
  listenerSeconds: number;
  /** Cumulative bytes sent to listeners: exact for finished listeners (access log), stats for connected ones. */
  bytesSent: number;
  /** Cumulative bytes read from sources, across source sessions (stats deltas, plus each ended session's unreported end). */
  bytesRead: number;
  /** The part of bytesRead that is estimated (the ends of sessions after their last refresh). */
  bytesReadEstimated: number;
  sourceConnected: boolean;
  /** stream_start of the current (or last) source session, ISO 8601. */
  sourceSince: string | null;
  /** Source sessions seen (a reconnect starts a new one). */
  sourceSessions: number;
  /** Finished listeners seen in the access log, and the exact bytes Icecast wrote to them. */
  finishedListeners: number;
  finishedListenerBytes: number;
  /** When the mount was last present in /admin/stats, ISO 8601. */
  lastSeenAt: string | null;
}

interface SessionState {
  /** stream_start ISO, or null when Icecast did not give one. */
  streamStart: string | null;
  totalBytesSent: number;
  totalBytesRead: number;
  /** When Icecast (probably) refreshed totalBytesRead to its value (ms since epoch). */
  readAt?: number | null;
  /** The refresh before that one, for the session's last measured rate. */
  previousRead?: { at: number; bytes: number } | null;
  /** Access-log bytes of the listeners that finished during this session. */
  finishedBytes?: number;
  /** The source has gone and its unreported last seconds were added. */
  closed?: boolean;
  /**
   * Once closed: what the listeners connected when the source went were sent (the stats counter's share), counted
   * until their access-log lines come, so that the count does not drop between the cut and their lines.
   */
  unfinished?: number;
  /** The proxy's exact figure for the session's connection (sourceEnded), once reported. */
  exactRead?: number | null;
  /** The estimated end added at the close (taken back when the exact figure comes after it). */
  tail?: number;
}

export interface MountCounters {
  /** Stats deltas (used as bytes sent when there is no access log). */
  bytesSent: number;
  bytesRead: number;
  bytesReadEstimated?: number;
  peakListeners: number;
  /** Access-log seconds of finished listeners (or, without access log, integrated listener seconds). */
  closedListenerSeconds: number;
  finishedListeners: number;
  finishedListenerBytes: number;
  sourceSessions: number;
  session: SessionState | null;
  sourceConnected: boolean;
  listeners: number;
  lastSeenAt: string | null;
}

export interface MountMeterState {
  version: 1;
  /** Position of the access log up to which finished listeners are counted. */
  accessLog: AccessLogPosition | null;
  /** Time of the last stats observation (ms since epoch), for integration. */
  lastPollAt: number | null;
  mounts: Record<string, MountCounters>;
  /** Finished listeners' lines read but waiting for their proxy's count (endedAt as ISO 8601 in JSON). */
  held?: HeldEntry[];
}

/** An access-log line waiting for its proxy's report, since `since` (ms since epoch). */
export interface HeldEntry {
  entry: AccessLogEntry;
  since: number;
}

/** An entry whose bytes are the proxy's: Icecast's own figure is kept for its session's counter. */
type CountedEntry = AccessLogEntry & { icecastBytes?: number };

export interface MountMeterOptions {
  /** Needed for poll(); the observe*() methods work without it. */
  admin?: Pick<IcecastAdmin, 'stats' | 'listClients'>;
  /** Icecast's access.log (IcecastSupervisor.accessLogPath): exact listener seconds and bytes. */
  accessLogPath?: string;
  /** Or a reader of your own (its position is saved in the state). */
  accessLog?: AccessLogReader;
  /** Restored state (from toJSON()). */
  state?: MountMeterState;
  /** Ask listclients for mounts with listeners (connected seconds). Default true. */
  listClients?: boolean;
  /**
   * A mount's listclients is asked again when its listeners may have changed (its count in the stats, a finished
   * listener's line), else at most this long after the last answer (ms). Default 30 s; 0 asks on every poll.
   */
  clientsRefreshMs?: number;
  now?: () => number;
  /** Our own readers of the mounts (the HLS segmenter): never counted as listeners, their bytes never as sent. */
  internal?: InternalListeners;
  /** Listeners (by their logged user) whose proxy reports the bytes it sent them (listenerEnded). */
  reportedByProxy?: (user: string | null) => boolean;
}

/** Our own listeners, counted by Icecast like any other; only authenticated ones carry the agent (see the decider). */
export interface InternalListeners {
  isInternalAgent(userAgent: string): boolean;
  /** Bytes our connected readers of `mount` received in this source session (their share of Icecast's counter). */
  connectedBytes(mount: string): number;
}

export interface MeterPoll {
  at: number;
  /** The raw stats of this poll (feed them to a SourceRateMonitor). */
  stats: MountStats[];
  /** Access-log entries counted by this poll (listeners that finished). */
  entries: AccessLogEntry[];
  snapshots: MountSnapshot[];
  /**
   * The client ids Icecast listed on every live mount in this poll (its listclients, our own readers included; none
   * for a mount without listeners); null for a mount whose listeners were not listed again (they seem unchanged
   * since the last poll that listed them) or whose listclients failed.
   */
  connected: Map<string, string[] | null>;
}

/** What the meter takes from one listclients answer of a mount. */
interface ClientsSummary {
  /** Every client listed, our own readers included (the stats count them too). */
  total: number;
  /** Our own readers among them. */
  own: number;
  /** The listeners: the rest. */
  listeners: number;
  /** The listeners' connected seconds, summed. */
  connectedSeconds: number;
}

/** A mount's last listclients answer, summarized, and when it came. */
interface ClientsSeen {
  summary: ClientsSummary;
  at: number;
}

const emptyCounters = (): MountCounters => ({
  bytesSent: 0,
  bytesRead: 0,
  bytesReadEstimated: 0,
  peakListeners: 0,
  closedListenerSeconds: 0,
  finishedListeners: 0,
  finishedListenerBytes: 0,
  sourceSessions: 0,
  session: null,
  sourceConnected: false,
  listeners: 0,
  lastSeenAt: null,
});

export class MountMeter {
  private readonly admin?: Pick<IcecastAdmin, 'stats' | 'listClients'>;
  readonly accessLog: AccessLogReader | null;
  private readonly askClients: boolean;
  private readonly now: () => number;
  private readonly mounts = new Map<string, MountCounters>();
  /** Connected listeners' seconds from the last listclients per mount; not persisted (they reach the log). */
  private readonly liveSeconds = new Map<string, number>();
  /** The last listclients answer per mount, while the mount has listeners. */
  private readonly clientsSeen = new Map<string, ClientsSeen>();
  private readonly clientsRefreshMs: number;
  private lastPollAt: number | null;
  /** The access-log position matching the counted entries (the reader may be ahead during a poll). */
  private logPosition: AccessLogPosition | null;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly internal?: InternalListeners;
  /** Our own readers seen connected by the last listclients, per mount (subtracted from the stats count). */
  private readonly internalConnected = new Map<string, number>();
  /** Source ends reported before the meter saw their session, per mount (kept until a poll closes it). */
  private readonly pendingEnds = new Map<string, SourceEnd>();
  private readonly reportedByProxy?: (user: string | null) => boolean;
  /** Listener ends the proxy reported, by user, with when they came (their lines may be read later). */
  private readonly listenerEnds = new Map<string, { bytes: number; at: number }>();
  /** Lines of listeners whose proxy has not reported yet. */
  private held: HeldEntry[];

  constructor(options: MountMeterOptions = {}) {
    this.admin = options.admin;
    this.internal = options.internal;
    this.reportedByProxy = options.reportedByProxy;
    this.askClients = options.listClients ?? true;
    this.clientsRefreshMs = options.clientsRefreshMs ?? CLIENTS_REFRESH_MS;
    this.now = options.now ?? Date.now;
    const state = options.state;
    if (state && state.version !== 1) throw new Error(`unknown mount meter state version ${String(state.version)}`);
    this.accessLog =
      options.accessLog ??
      (options.accessLogPath
        ? new AccessLogReader({ path: options.accessLogPath, start: state?.accessLog ?? undefined })
        : null);
    this.lastPollAt = state?.lastPollAt ?? null;
    this.held = (state?.held ?? []).map(({ entry, since }) => ({
      entry: { ...entry, endedAt: new Date(entry.endedAt) },
      since,
    }));
    this.logPosition = this.accessLog?.position ?? null;
    for (const [mount, counters] of Object.entries(state?.mounts ?? {})) {
      this.mounts.set(mount, {
        ...emptyCounters(),
        ...counters,
        session: counters.session ? { ...counters.session } : null,
      });
    }
  }

  /**
   * One round: new access-log lines, /admin/stats, then listclients for mounts with listeners (log before
   * clients, so a listener that leaves in between is briefly counted nowhere, never twice).
   * Calls are serialized.
   */
  poll(): Promise<MeterPoll> {
    const run = this.queue.then(() => this.pollNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async pollNow(): Promise<MeterPoll> {
    const admin = this.admin;
    if (!admin) throw new Error('MountMeter.poll() needs options.admin');
    const read = this.accessLog ? await this.accessLog.read() : [];
    const entries = this.settle(read, this.now());
    const position = this.accessLog?.position ?? null;
    let stats: MountStats[];
    try {
      stats = await admin.stats();
    } catch (error) {
      this.ingest(entries, position); // what was read is counted whatever happens to the rest
      throw error;
    }
    const at = this.now();
    const clients = new Map<string, ClientsSummary | null>();
    const listed = new Map<string, string[] | null>();
    if (this.askClients) {
      const finished = new Set(read.map((e) => e.mount));
      const wanted = stats.filter((s) => s.listeners > 0 || (this.liveSeconds.get(s.mount) ?? 0) > 0);
      await Promise.all(
        wanted.map(async (s) => {
          const seen = this.clientsSeen.get(s.mount);
          if (seen && this.unchanged(s, seen, finished, at)) return clients.set(s.mount, this.aged(seen, at));
          const list = await admin.listClients(s.mount).catch(() => null);
          const summary = list && this.summarize(list);
          clients.set(s.mount, summary);
          listed.set(s.mount, list && list.map(placeKey));
          if (summary) this.clientsSeen.set(s.mount, { summary, at });
          else this.clientsSeen.delete(s.mount);
        }),
      );
    }
    // Applied together, so that no snapshot sees a listener both in the log and among the connected.
    this.ingest(entries, position);
    // Our own readers are known before the stats count (which includes them) is read.
    for (const [mount, summary] of clients) if (summary) this.internalConnected.set(mount, summary.own);
    this.observeStats(stats, at);
    for (const [mount, summary] of clients) {
      if (summary) this.applyClients(mount, summary);
      else this.liveSeconds.delete(mount); // unknown: rather count nothing than twice
    }
    for (const mount of this.clientsSeen.keys()) if (!clients.has(mount)) this.clientsSeen.delete(mount);
    const connected = new Map<string, string[] | null>();
    for (const s of stats) {
      const asked = clients.has(s.mount) || !this.askClients;
      connected.set(s.mount, asked ? (listed.get(s.mount) ?? null) : []);
    }
    return { at, stats, entries, snapshots: this.snapshot(), connected };
  }

  /**
   * Whether a mount's listeners are those of its last listclients: the same count in the stats, no listener of it
   * finished since (a leave and a join between two polls keep the count), and that answer is recent.
   */
  private unchanged(s: MountStats, seen: ClientsSeen, finished: ReadonlySet<string>, at: number): boolean {
    return s.listeners === seen.summary.total && !finished.has(s.mount) && at - seen.at < this.clientsRefreshMs;
  }

  /**
   * The last listclients answer as it would be now: every listener connected that much longer. Worked out from its
   * summary, so a poll that finds nothing changed costs nothing per listener held.
   */
  private aged(seen: ClientsSeen, at: number): ClientsSummary {
    // Whole seconds, as Icecast counts them.
    const seconds = Math.round((at - seen.at) / 1000);
    const { summary } = seen;
    return { ...summary, connectedSeconds: summary.connectedSeconds + seconds * summary.listeners };
  }

  /**
   * The proxy's count of a listener that left: its access-log line (read before or after) is counted with these
   * bytes. Kept a minute for a line still to come.
   */
  listenerEnded(end: ListenerEnd): void {
    const at = this.now();
    if (this.listenerEnds.size >= MAX_LISTENER_ENDS) {
      for (const [user, e] of this.listenerEnds)
        if (at - e.at > LISTENER_END_KEPT_MS || this.listenerEnds.size >= MAX_LISTENER_ENDS)
          this.listenerEnds.delete(user);
    }
    this.listenerEnds.set(end.user, { bytes: end.bytes, at });
  }

  /**
   * The lines to count now, in the order read: a proxied listener's with its proxy's bytes, or held until they come
   * (at most LISTENER_END_WAIT_MS, then with Icecast's figure: a lost datagram, a listener HAProxy still holds).
   */
  private settle(read: readonly AccessLogEntry[], at: number): CountedEntry[] {
    const waiting = [...this.held, ...read.map((entry) => ({ entry, since: at }))];
    this.held = [];
    const ready: CountedEntry[] = [];
    for (const w of waiting) {
      const { entry } = w;
      const proxied = entry.kind === 'listener' && (this.reportedByProxy?.(entry.user) ?? false);
      const end = proxied ? this.listenerEnds.get(entry.user!) : undefined;
      if (end) {
        this.listenerEnds.delete(entry.user!);
        ready.push({ ...entry, bytes: end.bytes, icecastBytes: entry.bytes });
      } else if (proxied && at - w.since < LISTENER_END_WAIT_MS) this.held.push(w);
      else ready.push(entry);
    }
    return ready;
  }

  /**
   * Counts finished listeners (access-log entries of kind listener with a 2xx status). `position` is the
   * access-log position just after these entries; toJSON() saves it.
   */
  ingest(entries: readonly CountedEntry[], position?: AccessLogPosition | null): void {
    if (position !== undefined) this.logPosition = position ? { ...position } : null;
    for (const e of entries) {
      if (e.kind !== 'listener' || e.status < 200 || e.status > 299) continue;
      const c = this.counters(e.mount);
      // The session's counter is Icecast's: what it wrote for this listener leaves it, whoever counted the listener.
      const written = e.icecastBytes ?? e.bytes;
      if (c.session && !c.session.closed) c.session.finishedBytes = (c.session.finishedBytes ?? 0) + written;
      // Out of the session's counter too, or the connected listeners' share would still hold its bytes.
      if (this.internal?.isInternalAgent(e.userAgent)) continue;
      if (c.session?.closed && c.session.unfinished) c.session.unfinished = Math.max(0, c.session.unfinished - written);
      c.finishedListeners++;
      c.finishedListenerBytes += e.bytes;
      if (this.accessLog) c.closedListenerSeconds += e.durationSeconds;
    }
  }

  /** Feeds one /admin/stats answer (every live mount). Mounts missing from it have no source now. */
  observeStats(stats: readonly MountStats[], at: number = this.now()): void {
    const dt = this.lastPollAt === null ? 0 : Math.max(0, (at - this.lastPollAt) / 1000);
    const seen = new Set<string>();
    for (const s of stats) {
      seen.add(s.mount);
      const c = this.counters(s.mount);
      // Without the access log: integrate the listeners counted at the previous poll over the interval.
      if (!this.accessLog) c.closedListenerSeconds += c.listeners * dt;
      const streamStart = s.streamStart && !Number.isNaN(s.streamStart.getTime()) ? s.streamStart.toISOString() : null;
      const prev = c.session;
      const newSession =
        prev === null ||
        prev.streamStart !== streamStart ||
        s.totalBytesSent < prev.totalBytesSent ||
        s.totalBytesRead < prev.totalBytesRead;
      const startMs = streamStart === null ? null : Date.parse(streamStart);
      if (newSession) {
        // The old session ended between the last poll that saw it and the new session's start.
        if (prev && !prev.closed)
          this.closeSession(s.mount, c, prev, Math.min(this.endOf(c, at), startMs === null ? at : startMs + 1000));
        c.bytesSent += s.totalBytesSent;
        c.bytesRead += s.totalBytesRead;
        c.sourceSessions++;
        c.session = {
          streamStart,
          totalBytesSent: s.totalBytesSent,
          totalBytesRead: s.totalBytesRead,
          readAt: refreshTime(startMs, startMs, at),
          previousRead: null,
          finishedBytes: 0,
        };
      } else {
        c.bytesSent += s.totalBytesSent - prev.totalBytesSent;
        c.bytesRead += s.totalBytesRead - prev.totalBytesRead;
        const refreshed = s.totalBytesRead !== prev.totalBytesRead;
        c.session = {
          ...prev,
          totalBytesSent: s.totalBytesSent,
          totalBytesRead: s.totalBytesRead,
          ...(refreshed && {
            readAt: refreshTime(startMs, this.lastPollAt, at),
            previousRead: prev.readAt == null ? null : { at: prev.readAt, bytes: prev.totalBytesRead },
          }),
        };
      }
      c.sourceConnected = true;
      // listclients (when asked) replaces this with the exact count right after.
      const ours = this.internalConnected.get(s.mount) ?? 0;
      c.listeners = Math.max(0, s.listeners - ours);
      c.peakListeners = Math.max(c.peakListeners, c.listeners, s.listenerPeak - ours);
      c.lastSeenAt = new Date(at).toISOString();
    }
    for (const [mount, c] of this.mounts) {
      if (seen.has(mount)) continue;
      if (!this.accessLog) c.closedListenerSeconds += c.listeners * dt;
      if (c.sourceConnected && c.session && !c.session.closed)
        this.closeSession(mount, c, c.session, this.endOf(c, at));
      c.sourceConnected = false;
      c.listeners = 0;
      this.liveSeconds.delete(mount);
      this.internalConnected.delete(mount);
    }
    this.lastPollAt = at;
  }

  /** Feeds one listclients answer for `mount`. */
  observeClients(mount: string, all: readonly ListenerInfo[]): void {
    this.applyClients(mount, this.summarize(all));
  }

  private summarize(all: readonly ListenerInfo[]): ClientsSummary {
    let own = 0;
    let connectedSeconds = 0;
    for (const client of all) {
      if (this.internal?.isInternalAgent(client.userAgent)) own++;
      else connectedSeconds += client.connectedSeconds;
    }
    return { total: all.length, own, listeners: all.length - own, connectedSeconds };
  }

  private applyClients(mount: string, summary: ClientsSummary): void {
    const c = this.counters(mount);
    this.internalConnected.set(mount, summary.own);
    c.listeners = summary.listeners;
    c.peakListeners = Math.max(c.peakListeners, summary.listeners);
    if (this.accessLog) this.liveSeconds.set(mount, summary.connectedSeconds);
  }

  snapshot(): MountSnapshot[];
  snapshot(mount: string): MountSnapshot | undefined;
  snapshot(mount?: string): MountSnapshot[] | MountSnapshot | undefined {
    if (mount !== undefined) {
      const c = this.mounts.get(mount);
      return c ? this.toSnapshot(mount, c) : undefined;
    }
    return [...this.mounts].map(([m, c]) => this.toSnapshot(m, c));
  }

  /** Plain JSON to persist; pass it back as `state`. */
  toJSON(): MountMeterState {
    return {
      version: 1,
      accessLog: this.logPosition ? { ...this.logPosition } : null,
      lastPollAt: this.lastPollAt,
      mounts: Object.fromEntries(
        [...this.mounts].map(([m, c]) => [m, { ...c, session: c.session ? { ...c.session } : null }]),
      ),
      ...(this.held.length > 0 && { held: this.held.map((h) => ({ entry: { ...h.entry }, since: h.since })) }),
    };
  }

  /** Drops a mount's counters (e.g. once its usage has been billed and the mount retired). */
  forget(mount: string): boolean {
    this.liveSeconds.delete(mount);
    this.clientsSeen.delete(mount);
    this.pendingEnds.delete(mount);
    return this.mounts.delete(mount);
  }

  /**
   * The proxy's exact bytes of a source connection that closed: its session's total read, in place of Icecast's
   * last refresh and the estimate of the seconds after it. It may come before or after the poll that finds the
   * source gone; an end that matches no session seen is dropped (a refused source, or one shorter than a poll).
   */
  sourceEnded(end: SourceEnd): void {
    const c = this.mounts.get(end.mount);
    const session = c?.session;
    if (!c || !session || !sessionOf(session, end)) {
      this.pendingEnds.set(end.mount, end);
      return;
    }
    if (!session.closed) {
      session.exactRead = end.bytes;
      return;
    }
    if (session.exactRead != null) return;
    // Closed with an estimate: the exact figure replaces Icecast's last refresh and the estimated end.
    const tail = session.tail ?? 0;
    c.bytesRead += end.bytes - session.totalBytesRead - tail;
    c.bytesReadEstimated = Math.max(0, (c.bytesReadEstimated ?? 0) - tail);
    session.tail = 0;
    session.exactRead = end.bytes;
  }

  /** When a source that was last seen live at lastSeenAt and is gone at `at` probably ended. */
  private endOf(c: MountCounters, at: number): number {
    const seen = c.lastSeenAt === null ? NaN : Date.parse(c.lastSeenAt);
    return Number.isNaN(seen) || seen > at ? at : (seen + at) / 2;
  }

  /**
   * Adds what the session read after its last refresh: the proxy's exact figure when it has come, else its last
   * measured rate × the time until it ended.
   */
  private closeSession(mount: string, c: MountCounters, session: SessionState, endedAt: number): void {
    session.unfinished = this.connectedListenerBytes(mount, c);
    session.closed = true;
    const pending = this.pendingEnds.get(mount);
    if (pending && sessionOf(session, pending)) session.exactRead = pending.bytes;
    this.pendingEnds.delete(mount);
    if (session.exactRead != null) {
      c.bytesRead += session.exactRead - session.totalBytesRead;
      return;
    }
    const readAt = session.readAt;
    if (readAt == null || endedAt <= readAt) return;
    const start = session.streamStart === null ? NaN : Date.parse(session.streamStart);
    const from = session.previousRead ?? (Number.isNaN(start) ? null : { at: start, bytes: 0 });
    if (!from || readAt <= from.at) return;
    const perMs = (session.totalBytesRead - from.bytes) / (readAt - from.at);
    // Icecast refreshes every 5 s: a session cannot have gone on unreported for longer than that.
    const tail = Math.round(perMs * Math.min(endedAt - readAt, REFRESH_MS + 500));
    c.bytesRead += tail;
    c.bytesReadEstimated = (c.bytesReadEstimated ?? 0) + tail;
    session.tail = tail;
  }

  private counters(mount: string): MountCounters {
    let c = this.mounts.get(mount);
    if (!c) {
      c = emptyCounters();
      this.mounts.set(mount, c);
    }
    return c;
  }

  /**
   * Bytes the session's connected listeners took so far: its stats counter minus its finished listeners (once the
   * source has gone, what those connected then took, until their lines are counted).
   */
  private connectedListenerBytes(mount: string, c: MountCounters): number {
    const s = c.session;
    if (s?.closed) return s.unfinished ?? 0;
    // A listener gone from the stats whose line waits for HAProxy's count is still in the session's counter.
    if (!c.sourceConnected || !s || (c.listeners === 0 && !this.held.some((h) => h.entry.mount === mount))) return 0;
    return Math.max(0, s.totalBytesSent - (s.finishedBytes ?? 0) - (this.internal?.connectedBytes(mount) ?? 0));
  }

  private toSnapshot(mount: string, c: MountCounters): MountSnapshot {
    return {
      mount,
      listeners: c.listeners,
      peakListeners: c.peakListeners,
      listenerSeconds: c.closedListenerSeconds + (c.sourceConnected ? (this.liveSeconds.get(mount) ?? 0) : 0),
      bytesSent: this.accessLog ? c.finishedListenerBytes + this.connectedListenerBytes(mount, c) : c.bytesSent,
      bytesRead: c.bytesRead,
      bytesReadEstimated: c.bytesReadEstimated ?? 0,
      sourceConnected: c.sourceConnected,
      sourceSince: c.session?.streamStart ?? null,
      sourceSessions: c.sourceSessions,
      finishedListeners: c.finishedListeners,
      finishedListenerBytes: c.finishedListenerBytes,
      lastSeenAt: c.lastSeenAt,
    };
  }
}

/** At most this long between two listclients of a mount whose listeners seem unchanged. */
const CLIENTS_REFRESH_MS = 30_000;
/** How long a proxied listener's line waits for its proxy's count, and how long a count waits for its line. */
const LISTENER_END_WAIT_MS = 5000;
const LISTENER_END_KEPT_MS = 60_000;
const MAX_LISTENER_ENDS = 20_000;
/** Icecast refreshes a source's counters every 5 s. */
const REFRESH_MS = 5000;
/** How long after the proxy accepted a source Icecast may start its session (the front door's slot timeout, and more). */
const SOURCE_START_MS = 15_000;

/**
 * Whether `end` is the connection of `session`: Icecast's stream_start (whole seconds, rounded down) lies between the
 * proxy's accept and the close, and not long after the accept (a reconnect that starts within a second of the close
 * is not the connection that closed).
 */
function sessionOf(session: SessionState, end: SourceEnd): boolean {
  if (session.streamStart === null) return true;
  const start = Date.parse(session.streamStart);
  return start >= end.openedAt - 1000 && start <= end.closedAt && start <= end.openedAt + SOURCE_START_MS;
}

/**
 * When Icecast refreshed a counter seen changed at `at`: at stream_start + 5 k s (its clock ticks in whole
 * seconds, so a little after), and after `after` (the previous poll, which saw the old value).
 */
function refreshTime(startMs: number | null, after: number | null, at: number): number {
  if (startMs === null || Number.isNaN(startMs) || startMs > at) return at;
  const tick = startMs + Math.floor((at - startMs) / REFRESH_MS) * REFRESH_MS + 250;
  return Math.min(at, Math.max(tick, after ?? tick));
}
