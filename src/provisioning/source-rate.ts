// Measures each source's inbound byte rate from successive /admin/stats total_bytes_read values and
// decides whether it stays above what the mount allows. Icecast enforces no bitrate itself.
//
// Icecast refreshes total_bytes_read every ~5 s, so the rate is measured between the moments the
// counter is seen to change (plus the session start, where it is 0). A first value seen in the middle
// of a session is not such a moment and is not used. The monitor decides nothing from wall-clock time
// of its own: it only uses the times passed to observe().

import type { MountStats } from './icecast-admin.js';

export interface SourceRateOptions {
  /** The rate must stay above the limit for this long. Default 10 000 ms. */
  windowMs?: number;
  /**
   * How much shorter than the window the measured span may be: stream_start has whole-second precision
   * and Icecast refreshes on a whole-second clock. Default 1000 ms.
   */
  slackMs?: number;
  /** Allowed = bitrate_kbps × 1000 / 8 × this. Default 1.25. */
  tolerance?: number;
  /**
   * With no counter change for this long the measurement is stale (stalled source or missed polls) and
   * nothing is over the limit. Default 7000 ms (Icecast refreshes every ~5 s).
   */
  staleMs?: number;
}

export interface SourceRate {
  mount: string;
  /** Average inbound bytes/s over the measured span; null before two usable points. */
  bytesPerSecond: number | null;
  /** The slowest stretch between two counter changes inside the span. */
  minSegmentBytesPerSecond: number | null;
  /** How much time the measurement covers (ms); over-limit needs windowMs − slackMs. */
  spanMs: number;
  /** Counter changes used. */
  points: number;
  /** The measurement is fresh and covers the window. */
  complete: boolean;
  sessionStart: string | null;
}

export interface OverLimit {
  mount: string;
  allowedKbps: number;
  allowedBytesPerSecond: number;
  rate: SourceRate;
}

interface Point {
  at: number;
  bytes: number;
}
interface MountTrack {
  sessionStart: string | null;
  lastBytes: number;
  lastObservedAt: number;
  points: Point[];
}

/** bytes/s a mount may read: kbps × 1000 / 8 × tolerance. */
export function allowedBytesPerSecond(allowedKbps: number, tolerance = 1.25): number {
  return ((allowedKbps * 1000) / 8) * tolerance;
}

export class SourceRateMonitor {
  readonly windowMs: number;
  readonly slackMs: number;
  readonly tolerance: number;
  readonly staleMs: number;
  private readonly tracks = new Map<string, MountTrack>();

  constructor(options: SourceRateOptions = {}) {
    this.windowMs = options.windowMs ?? 10_000;
    this.slackMs = options.slackMs ?? 1000;
    this.tolerance = options.tolerance ?? 1.25;
    this.staleMs = options.staleMs ?? 7000;
  }

  /** Feeds one /admin/stats answer covering every live mount; mounts missing from it are forgotten. */
  observe(stats: readonly MountStats[], at: number = Date.now()): void {
    const seen = new Set<string>();
    for (const s of stats) {
      seen.add(s.mount);
      this.observeMount(s.mount, s.totalBytesRead, s.streamStart, at);
    }
    for (const mount of this.tracks.keys()) if (!seen.has(mount)) this.tracks.delete(mount);
  }

  /** Feeds one mount's counter. A changed stream_start or a smaller counter starts a new session. */
  observeMount(mount: string, totalBytesRead: number, streamStart: Date | null, at: number): void {
    const start = streamStart && !Number.isNaN(streamStart.getTime()) ? streamStart : null;
    const sessionStart = start?.toISOString() ?? null;
    let track = this.tracks.get(mount);
    if (!track || track.sessionStart !== sessionStart || totalBytesRead < track.lastBytes) {
      // The counter was 0 at stream_start: that is a true point. The first value seen is not (we do not
      // know when Icecast refreshed it), unless it is still 0.
      const points: Point[] = [];
      if (start && start.getTime() <= at) points.push({ at: start.getTime(), bytes: 0 });
      track = { sessionStart, lastBytes: totalBytesRead, lastObservedAt: at, points };
      this.tracks.set(mount, track);
      return;
    }
    track.lastObservedAt = Math.max(track.lastObservedAt, at);
    if (totalBytesRead === track.lastBytes) return;
    track.lastBytes = totalBytesRead;
    track.points.push({ at, bytes: totalBytesRead });
    // Keep what the window can need, plus the point just before it.
    const horizon = at - 3 * this.windowMs;
    while (track.points.length > 2 && track.points[1].at < horizon) track.points.shift();
  }

  /** The measured rate of `mount`, or undefined when it has not been seen live. */
  rate(mount: string): SourceRate | undefined {
    const track = this.tracks.get(mount);
    if (!track) return undefined;
    const { points } = track;
    const none: SourceRate = {
      mount,
      bytesPerSecond: null,
      minSegmentBytesPerSecond: null,
      spanMs: 0,
      points: points.length,
      complete: false,
      sessionStart: track.sessionStart,
    };
    if (points.length < 2) return none;
    const last = points[points.length - 1];
    // The newest point at least (window − slack) before the last one; else the oldest (incomplete).
    const need = this.windowMs - this.slackMs;
    let first = 0;
    for (let i = points.length - 2; i >= 0; i--) {
      if (last.at - points[i].at >= need) {
        first = i;
        break;
      }
    }
    const spanMs = last.at - points[first].at;
    if (spanMs <= 0) return none;
    let minSegment = Infinity;
    for (let i = first + 1; i < points.length; i++) {
      const dt = points[i].at - points[i - 1].at;
      if (dt > 0) minSegment = Math.min(minSegment, ((points[i].bytes - points[i - 1].bytes) * 1000) / dt);
    }
    const fresh = track.lastObservedAt - last.at <= this.staleMs;
    return {
      mount,
      bytesPerSecond: ((last.bytes - points[first].bytes) * 1000) / spanMs,
      minSegmentBytesPerSecond: Number.isFinite(minSegment) ? minSegment : null,
      spanMs,
      points: points.length - first,
      complete: fresh && spanMs >= need,
      sessionStart: track.sessionStart,
    };
  }

  /**
   * True when the source read more than allowedKbps × 1000/8 × tolerance bytes/s over the whole window:
   * the average and every stretch between counter changes. Pure: depends only on what was observed.
   */
  overLimit(mount: string, allowedKbps: number): boolean {
    const r = this.rate(mount);
    if (!r || !r.complete || r.bytesPerSecond === null || r.minSegmentBytesPerSecond === null) return false;
    const limit = allowedBytesPerSecond(allowedKbps, this.tolerance);
    return r.bytesPerSecond > limit && r.minSegmentBytesPerSecond > limit;
  }

  /** Every observed mount with an allowance that is over it. */
  check(allowedKbps: Record<string, number> | ((mount: string) => number | undefined)): OverLimit[] {
    const allowance = typeof allowedKbps === 'function' ? allowedKbps : (m: string) => allowedKbps[m];
    const over: OverLimit[] = [];
    for (const mount of this.tracks.keys()) {
      const kbps = allowance(mount);
      if (kbps === undefined || !this.overLimit(mount, kbps)) continue;
      over.push({
        mount,
        allowedKbps: kbps,
        allowedBytesPerSecond: allowedBytesPerSecond(kbps, this.tolerance),
        rate: this.rate(mount)!,
      });
    }
    return over;
  }

  mounts(): string[] {
    return [...this.tracks.keys()];
  }

  forget(mount: string): void {
    this.tracks.delete(mount);
  }
}
