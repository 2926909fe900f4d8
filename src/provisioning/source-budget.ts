// The bitrate a source may send, enforced on its average over a window rather than on each moment: a token bucket
// per service, fed with the service's cumulative bytes read (which keeps counting across source reconnects).
//
// The bucket holds `bought rate × window` bytes and refills at `bought rate × tolerance`. A source at the bought
// bitrate never empties it (the tolerance covers container/ID3 framing, about 1 % with ffmpeg's MP3, and the
// capacity a burst at connect); a source that sends more drains it and is over once it is empty, however it
// alternates fast and slow stretches or reconnects. Once over, it stays over (refused) until the bucket has
// refilled to `resumeFraction` of its capacity.
//
// A host that could not read its counters for a while (Icecast's stats unanswered: a stalled or overloaded host) did
// not read its sources either: their audio waited in the sockets and arrives at once when the host wakes, more than a
// window of it after a long stall. The refill of that stall is kept above the capacity for one window after the
// readings resume, so the backlog of a source that kept to its bitrate is paid for; a source that sends more is still
// cut, a little later.
//
// Pure: it decides only from the readings and times passed to observe(). Its state is plain JSON.

export interface SourceBudgetOptions {
  /** Bucket capacity in seconds of the bought bitrate. Default 30. */
  windowSeconds?: number;
  /** Refill rate as a multiple of the bought bitrate. Default 1.1. */
  tolerance?: number;
  /** An emptied bucket lets the source back once refilled to this fraction. Default 0.5. */
  resumeFraction?: number;
}

export interface SourceBudgetState {
  /** Bytes left in the bucket (negative: overdrawn). */
  level: number;
  /** Cumulative bytes read at the last observation. */
  bytesRead: number;
  /** Time of the last observation (ms since epoch). */
  at: number;
  /** Emptied and not refilled enough yet. */
  over: boolean;
  /** Refill of a stall of the host, allowed above the capacity until `until` (ms since epoch). */
  stallCredit?: { bytes: number; until: number };
}

/** When the host could not read its counters (ms since epoch): from its last reading before to the first after. */
export interface HostStall {
  from: number;
  to: number;
}

/** What observe() may know besides the reading: a state saved earlier, the host's latest stall. */
export interface SourceBudgetContext {
  restored?: SourceBudgetState;
  stall?: HostStall;
}

export interface SourceBudgetReading extends SourceBudgetState {
  capacity: number;
  /** Bytes per second the bucket refills with. */
  refillPerSecond: number;
  /** While over: when the bucket will have refilled enough to let a source back (ms since epoch). */
  refusedUntil: number | null;
}

/** Bytes per second of a bitrate in kbps. */
const bytesPerSecond = (kbps: number) => (kbps * 1000) / 8;

export class SourceBudget {
  readonly windowSeconds: number;
  readonly tolerance: number;
  readonly resumeFraction: number;
  private readonly buckets = new Map<string, SourceBudgetState>();

  constructor(options: SourceBudgetOptions = {}) {
    this.windowSeconds = options.windowSeconds ?? 30;
    this.tolerance = options.tolerance ?? 1.1;
    this.resumeFraction = options.resumeFraction ?? 0.5;
  }

  capacity(kbps: number): number {
    return bytesPerSecond(kbps) * this.windowSeconds;
  }

  refillPerSecond(kbps: number): number {
    return bytesPerSecond(kbps) * this.tolerance;
  }

  /**
   * Charges what `key` read since the last observation and refills for the time in between. The first observation
   * of a key starts from `context.restored` (a state saved earlier) or a full bucket; bytes read before it are not
   * charged. A `context.stall` that ended since the key's last observation credits its refill (see the top).
   */
  observe(key: string, kbps: number, bytesRead: number, at: number, context: SourceBudgetContext = {}) {
    const capacity = this.capacity(kbps);
    const refill = this.refillPerSecond(kbps);
    const state = this.bucketOf(key, capacity, bytesRead, at, context.restored);
    const seconds = Math.max(0, at - state.at) / 1000;
    // A smaller counter means the meter was reset: nothing to charge.
    const read = Math.max(0, bytesRead - state.bytesRead);
    const stall = context.stall;
    if (stall && stall.to > state.at && stall.to <= at) {
      const stalledSeconds = (stall.to - Math.max(stall.from, state.at)) / 1000;
      state.stallCredit = { bytes: refill * stalledSeconds, until: stall.to + this.windowSeconds * 1000 };
    }
    if (state.stallCredit && at > state.stallCredit.until) delete state.stallCredit;
    // The bytes of an interval are taken as read evenly over it, so the bucket is capped after they are charged:
    // capped before, a late reading would charge every byte of the gap against at most one window of refill.
    state.level = Math.min(capacity + (state.stallCredit?.bytes ?? 0), state.level + refill * seconds - read);
    state.bytesRead = bytesRead;
    state.at = Math.max(state.at, at);
    if (state.level < 0) state.over = true;
    else if (state.over && state.level >= capacity * this.resumeFraction) state.over = false;
    const refusedUntil = state.over
      ? state.at + Math.ceil(((capacity * this.resumeFraction - state.level) / refill) * 1000)
      : null;
    return { ...state, capacity, refillPerSecond: refill, refusedUntil } satisfies SourceBudgetReading;
  }

  private bucketOf(
    key: string,
    capacity: number,
    bytesRead: number,
    at: number,
    restored?: SourceBudgetState,
  ): SourceBudgetState {
    let state = this.buckets.get(key);
    if (!state) {
      state =
        restored && validState(restored) && restored.at <= at && restored.bytesRead <= bytesRead
          ? { ...restored }
          : { level: capacity, bytesRead, at, over: false };
      this.buckets.set(key, state);
    }
    return state;
  }

  forget(key: string): void {
    this.buckets.delete(key);
  }
}

function validState(s: SourceBudgetState): boolean {
  return (
    [s.level, s.bytesRead, s.at].every(finite) &&
    typeof s.over === 'boolean' &&
    (s.stallCredit === undefined || [s.stallCredit.bytes, s.stallCredit.until].every(finite))
  );
}

const finite = (n: unknown) => typeof n === 'number' && Number.isFinite(n);
