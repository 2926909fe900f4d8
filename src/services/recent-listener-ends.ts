import type { AccessLogEntry, InternalListeners } from '../provisioning/index.js';

/** One finished listener's bytes, as the meter counted them, with when its connection ended and when it was counted. */
interface CountedEnd {
  mount: string;
  endedAt: number;
  bytes: number;
  countedAt: number;
}

/** How long counted ends are kept: longer than any renewal asks about (TransferRenewals' settling window). */
export const RECENT_ENDS_KEPT_MS = 120_000;
/** A bound on memory: past it the oldest are dropped, and nothing before the newest dropped can be told any more. */
const MAX_RECENT_ENDS = 50_000;

/**
 * The listeners the meter counted as finished in the last two minutes (their access-log lines, with the proxy's bytes
 * where it reports them), so that the bytes of connections that ended by a given time can be told apart from those
 * that ended after it although they were counted later (a line read on the next poll, or held for HAProxy's count).
 */
export class RecentListenerEnds {
  private ends: CountedEnd[] = [];
  /** Every end counted since then is kept (until it is older than RECENT_ENDS_KEPT_MS). */
  private keptSince: number;

  constructor(
    private readonly internal?: Pick<InternalListeners, 'isInternalAgent'>,
    now = Date.now(),
  ) {
    this.keptSince = now;
  }

  /** The entries one poll counted (MeterPoll.entries): only those the meter counts as listeners' bytes are kept. */
  record(entries: readonly AccessLogEntry[], countedAt: number): void {
    for (const e of entries) {
      if (e.kind !== 'listener' || e.status < 200 || e.status > 299) continue;
      if (this.internal?.isInternalAgent(e.userAgent)) continue;
      this.ends.push({ mount: e.mount, endedAt: e.endedAt.getTime(), bytes: e.bytes, countedAt });
    }
    this.prune(countedAt);
  }

  /**
   * Bytes of `mount`'s finished listeners counted so far whose connection ended after `at`; undefined when that can no
   * longer be told (`at` is older than what is kept, or than this process's first poll).
   */
  endedAfter(mount: string, at: number, now = Date.now()): number | undefined {
    if (at < this.keptSince || at < now - RECENT_ENDS_KEPT_MS) return undefined;
    let bytes = 0;
    for (const e of this.ends) if (e.mount === mount && e.endedAt > at) bytes += e.bytes;
    return bytes;
  }

  private prune(now: number): void {
    let drop = 0;
    while (drop < this.ends.length && this.ends[drop].countedAt < now - RECENT_ENDS_KEPT_MS) drop++;
    if (this.ends.length - drop > MAX_RECENT_ENDS) {
      drop = this.ends.length - MAX_RECENT_ENDS;
      this.keptSince = Math.max(this.keptSince, this.ends[drop - 1].countedAt);
    }
    if (drop > 0) this.ends = this.ends.slice(drop);
  }
}
