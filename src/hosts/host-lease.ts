/**
 * How long a streaming host may go on serving on its last heartbeat (fencing, issue 24). The pool's monitors count a
 * host down once its heartbeat is HOST_DOWN_AFTER_SECONDS old and move its services at once: a host that cannot
 * write its heartbeat (cut off from PostgreSQL, or stalled) must have stopped serving them by then, whether or not it
 * can read PostgreSQL to learn that they moved. The lease runs from when the last beat that was written was sent
 * (the database stamps it later, never earlier) and ends a heartbeat interval before the bound; when it ends
 * `onLost` runs (the host cuts every mount), and until a beat is written again the host admits no source or listener.
 */
export class HostLease {
  private renewedAt?: number;
  private timer?: NodeJS.Timeout;
  readonly durationMs: number;
  /** What the host does when the lease runs out (set once the reconciler exists). */
  onLost: () => void = () => undefined;

  constructor(downAfterSeconds: number, heartbeatMs: number) {
    const bound = downAfterSeconds * 1000;
    this.durationMs = Math.max(bound - heartbeatMs, bound / 2);
  }

  /** True while the last written heartbeat is recent enough to serve on. */
  get held(): boolean {
    return this.renewedAt !== undefined && performance.now() - this.renewedAt < this.durationMs;
  }

  /** A heartbeat sent at `sentAt` (performance.now(): a clock the wall clock's corrections do not move) was written. */
  renew(sentAt: number): void {
    if (this.renewedAt !== undefined && sentAt <= this.renewedAt) return;
    this.renewedAt = sentAt;
    clearTimeout(this.timer);
    const left = sentAt + this.durationMs - performance.now();
    if (left <= 0) return;
    this.timer = setTimeout(() => this.expired(), left);
    this.timer.unref();
  }

  /** Runs `beat` and renews the lease from when it was sent, once it has been written. */
  async beat(write: () => Promise<void>): Promise<void> {
    const sentAt = performance.now();
    await write();
    this.renew(sentAt);
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private expired(): void {
    this.timer = undefined;
    if (!this.held) this.onLost();
  }
}
