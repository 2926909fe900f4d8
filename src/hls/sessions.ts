import { PLAYLIST_BURST } from './session-pace.js';
import { HLS_SEGMENT_SECONDS } from './url.js';

/** A client is present while it fetched something within twice the segment length (AzuraCast's rule). */
export const PRESENCE_MS = 2 * HLS_SEGMENT_SECONDS * 1000;

export interface HlsSession {
  token: string;
  serviceId: string;
  startedAt: number;
  lastSeenAt: number;
  /** Bytes counted to this session (its media playlists and the segments they gave it), for its listener_sessions row. */
  bytes: number;
  /** The newest segment its playlists listed (undefined before its first). */
  newestShown?: number;
  /** Media playlist fetches it may make now, when that was computed, refusals since (session-pace.ts). */
  allowance: number;
  allowanceAt: number;
  refusals: number;
}

/** What a service's HLS listeners used since the last save (added to hls_usage then). */
export interface UsageDelta {
  bytes: number;
  listenerMs: number;
  sessions: number;
}

/**
 * HLS listener sessions in memory, one per token: the token rides only in the media playlist's address (segment
 * addresses are shared by every listener). Each holds a row in the listeners table (the bought places, shared with
 * Icecast) while present.
 */
export class HlsSessions {
  private readonly byToken = new Map<string, HlsSession>();
  private readonly pending = new Map<string, UsageDelta>();

  constructor(private readonly presenceMs = PRESENCE_MS) {}

  get(token: string): HlsSession | undefined {
    return this.byToken.get(token);
  }

  open(token: string, serviceId: string, now = Date.now()): HlsSession {
    const session = {
      token,
      serviceId,
      startedAt: now,
      lastSeenAt: now,
      bytes: 0,
      allowance: PLAYLIST_BURST,
      allowanceAt: now,
      refusals: 0,
    };
    this.byToken.set(token, session);
    this.delta(serviceId).sessions += 1;
    return session;
  }

  /** A fetch by the session; `bytes` is what was written to it. */
  seen(session: HlsSession, bytes: number, now = Date.now()): void {
    session.lastSeenAt = Math.max(session.lastSeenAt, now);
    session.bytes += bytes;
    this.delta(session.serviceId).bytes += bytes;
  }

  /** Ends the sessions not seen within the presence time (or all of a service's): their time is counted. */
  endIdle(now = Date.now(), serviceGone: (serviceId: string) => boolean = () => false): HlsSession[] {
    const ended: HlsSession[] = [];
    for (const session of this.byToken.values()) {
      if (now - session.lastSeenAt <= this.presenceMs && !serviceGone(session.serviceId)) continue;
      this.byToken.delete(session.token);
      this.delta(session.serviceId).listenerMs += presentMs(session, now);
      ended.push(session);
    }
    return ended;
  }

  /** Ends one session now (its time is counted); undefined if it is not open. */
  end(token: string, now = Date.now()): HlsSession | undefined {
    const session = this.byToken.get(token);
    if (!session) return undefined;
    this.byToken.delete(token);
    this.delta(session.serviceId).listenerMs += presentMs(session, now);
    return session;
  }

  /** The service's open sessions: how many and their time so far. */
  openOf(serviceId: string, now = Date.now()): { count: number; listenerMs: number } {
    let count = 0;
    let listenerMs = 0;
    for (const session of this.byToken.values()) {
      if (session.serviceId !== serviceId) continue;
      count++;
      listenerMs += presentMs(session, now);
    }
    return { count, listenerMs };
  }

  serviceIds(): Set<string> {
    return new Set([...this.byToken.values()].map((s) => s.serviceId));
  }

  hasAny(serviceId: string): boolean {
    for (const session of this.byToken.values()) if (session.serviceId === serviceId) return true;
    return false;
  }

  /** What was used since the last call (to save); a failed save gives it back with restore(). */
  takeUsage(): Map<string, UsageDelta> {
    const taken = new Map(this.pending);
    this.pending.clear();
    return taken;
  }

  restore(serviceId: string, delta: UsageDelta): void {
    const d = this.delta(serviceId);
    d.bytes += delta.bytes;
    d.listenerMs += delta.listenerMs;
    d.sessions += delta.sessions;
  }

  unsaved(serviceId: string): UsageDelta {
    return this.pending.get(serviceId) ?? { bytes: 0, listenerMs: 0, sessions: 0 };
  }

  private delta(serviceId: string): UsageDelta {
    let d = this.pending.get(serviceId);
    if (!d) this.pending.set(serviceId, (d = { bytes: 0, listenerMs: 0, sessions: 0 }));
    return d;
  }
}

/**
 * A session's listening time: from its first fetch until what its last fetch gave it has played (a segment's length
 * later), never beyond now. The wait of twice a segment before an idle session is ended is not listening.
 */
export function presentMs(session: HlsSession, now = Date.now()): number {
  return Math.max(0, Math.min(now, session.lastSeenAt + HLS_SEGMENT_SECONDS * 1000) - session.startedAt);
}
