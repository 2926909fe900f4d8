/**
 * How long a streaming host may go on serving on its last heartbeat (fencing). The pool's monitors count a
 * host down once its heartbeat is HOST_DOWN_AFTER_SECONDS old and move its services at once: a host that cannot
 * write its heartbeat (cut off from PostgreSQL, or stalled) must have stopped serving them by then, whether or not it
 * can read PostgreSQL to learn that they moved. The lease runs from when the last beat that was written was sent
 * (the database stamps it later, never earlier) and ends a heartbeat interval before the bound; when it ends
 * `onLost` runs (the host cuts every mount), and until a beat is written again the host admits no source or listener.
 */
export class HostLease {
  private renewedAt?: number;
  private timer?: NodeJS.Timeout;
  /** The lease ran out and onLost ran; no beat was written since. */
  private lost = false;
  private stopped = false;
  readonly durationMs: number;
  /** How many times the lease ran out since the process started (a metric). */
  losses = 0;
  /** What the host does when the lease runs out (set once the reconciler exists). */
  onLost: () => void = () => undefined;

  constructor(
    downAfterSeconds: number,
    private readonly heartbeatMs: number,
  ) {
    const bound = downAfterSeconds * 1000;
    this.durationMs = Math.max(bound - heartbeatMs, bound / 2);
  }

  /** True while the last written heartbeat is recent enough to serve on. */
  get held(): boolean {
    return this.renewedAt !== undefined && performance.now() - this.renewedAt < this.durationMs;
  }

  /** What the operator sees (/health/details): whether it holds, and since when it was renewed or lost. */
  state(): { held: boolean; duration_ms: number; renewed_ms_ago: number | null; losses: number } {
    const ago = this.renewedAt === undefined ? null : Math.round(performance.now() - this.renewedAt);
    return { held: this.held, duration_ms: this.durationMs, renewed_ms_ago: ago, losses: this.losses };
  }

  /**
   * How long one heartbeat may take before it is given up (its connection closed) and the next one tried: after a
   * partition heals, a beat hung on a connection that went silent would otherwise wait for TCP's retransmission (up
   * to minutes) before the lease could be taken again. Two intervals, and never beyond the lease itself (a beat
   * written later than that renews nothing).
   */
  get beatTimeoutMs(): number {
    return Math.min(this.durationMs, 2 * this.heartbeatMs);
  }

  /** A heartbeat sent at `sentAt` (performance.now(): a clock the wall clock's corrections do not move) was written. */
  renew(sentAt: number): void {
    if (this.stopped || (this.renewedAt !== undefined && sentAt <= this.renewedAt)) return;
    this.renewedAt = sentAt;
    if (this.held) this.lost = false;
    this.arm();
  }

  /** Runs `beat` and renews the lease from when it was sent, once it has been written. */
  async beat(write: () => Promise<void>): Promise<void> {
    const sentAt = performance.now();
    await write();
    this.renew(sentAt);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Wakes when the lease ends; a beat written late (after its own lease) ends it at once. */
  private arm(): void {
    clearTimeout(this.timer);
    const left = this.renewedAt! + this.durationMs - performance.now();
    this.timer = setTimeout(() => this.expired(), Math.max(0, Math.ceil(left)));
    this.timer.unref();
  }

  private expired(): void {
    this.timer = undefined;
    if (this.stopped) return;
    // Timers count from the event loop's cached time and may wake a little early: the lease may still hold.
    if (this.held) return this.arm();
    if (this.lost) return;
    this.lost = true;
    this.losses++;
    this.onLost();
  }
}
