import { ApiError } from '../errors/index.js';

interface Waiter {
  owner: string;
  large: boolean;
  seq: number;
  turn: () => void;
}

/**
 * Bounds how many audio checks (ffprobe, a read through the file, a few decoded windows) run at once on this
 * instance: a few run, a few wait their turn for a bounded time, and the rest are turned away at once with a
 * retryable 503.
 *
 * The work of a check grows with the file's size, so checks are scheduled by it. A large file (more than
 * `largeBytes`) may hold every slot but one and wait in a queue of its own, half the size of the small files' one:
 * however many large uploads arrive, from however many keys, a small upload runs in the slot they leave and never
 * waits behind them. Waiting small checks go before waiting large ones, and among each the buyer (`owner`) running
 * the fewest goes first. One buyer may still hold at most half the slots and half of each queue.
 */
export class ProbeSlots {
  private running = 0;
  private runningLarge = 0;
  private seq = 0;
  private readonly byOwner = new Map<string, { running: number; waiting: number }>();
  private readonly waiting: Waiter[] = [];
  private readonly perOwner: number;
  private readonly perOwnerQueue: number;
  private readonly maxLarge: number;
  private readonly largeQueueMax: number;

  constructor(
    private readonly max: number,
    private readonly queueMax: number,
    private readonly waitMs: number,
    private readonly largeBytes = Number.POSITIVE_INFINITY,
  ) {
    this.perOwner = Math.max(1, Math.ceil(max / 2));
    this.perOwnerQueue = Math.max(1, Math.ceil(queueMax / 2));
    this.maxLarge = Math.max(1, max - 1);
    this.largeQueueMax = Math.ceil(queueMax / 2);
  }

  /** Throws the retryable 503 when a new check of this owner, of a file of `bytes`, would be turned away now. */
  refuseIfFull(owner: string, bytes = 0): void {
    const large = this.isLarge(bytes);
    if (!this.mayRun(owner, large) && !this.mayWait(owner, large)) throw busy();
  }

  async run<T>(owner: string, bytes: number, work: () => Promise<T>): Promise<T> {
    const large = this.isLarge(bytes);
    await this.acquire(owner, large);
    try {
      return await work();
    } finally {
      this.running--;
      if (large) this.runningLarge--;
      this.count(owner).running--;
      this.forget(owner);
      this.next();
    }
  }

  private isLarge(bytes: number): boolean {
    return bytes > this.largeBytes;
  }

  /** Starts the waiting checks that may run now: small before large, then the owner running fewest, then the oldest. */
  private next(): void {
    for (;;) {
      const ready = this.waiting.filter((w) => this.mayRun(w.owner, w.large));
      if (!ready.length) return;
      const running = (w: Waiter) => this.byOwner.get(w.owner)?.running ?? 0;
      ready.sort((a, b) => Number(a.large) - Number(b.large) || running(a) - running(b) || a.seq - b.seq);
      this.waiting.splice(this.waiting.indexOf(ready[0]), 1);
      ready[0].turn();
    }
  }

  private mayRun(owner: string, large: boolean): boolean {
    return (
      this.running < this.max &&
      (!large || this.runningLarge < this.maxLarge) &&
      (this.byOwner.get(owner)?.running ?? 0) < this.perOwner
    );
  }

  private mayWait(owner: string, large: boolean): boolean {
    const queued = this.waiting.filter((w) => w.large === large).length;
    const mine = this.waiting.filter((w) => w.large === large && w.owner === owner).length;
    const queueMax = large ? this.largeQueueMax : this.queueMax;
    return queued < queueMax && mine < Math.min(this.perOwnerQueue, Math.max(1, Math.ceil(queueMax / 2)));
  }

  private count(owner: string): { running: number; waiting: number } {
    let count = this.byOwner.get(owner);
    if (!count) this.byOwner.set(owner, (count = { running: 0, waiting: 0 }));
    return count;
  }

  private forget(owner: string): void {
    const count = this.byOwner.get(owner);
    if (count && count.running === 0 && count.waiting === 0) this.byOwner.delete(owner);
  }

  private start(owner: string, large: boolean): void {
    this.running++;
    if (large) this.runningLarge++;
    this.count(owner).running++;
  }

  private acquire(owner: string, large: boolean): Promise<void> {
    // A check that could run still waits when others wait before it (a small one only behind small ones).
    const ahead = this.waiting.some((w) => !w.large || large);
    if (!ahead && this.mayRun(owner, large)) {
      this.start(owner, large);
      return Promise.resolve();
    }
    if (!this.mayWait(owner, large)) return Promise.reject(busy());
    this.count(owner).waiting++;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        owner,
        large,
        seq: this.seq++,
        turn: () => {
          clearTimeout(timer);
          this.count(owner).waiting--;
          this.start(owner, large);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        this.count(owner).waiting--;
        this.forget(owner);
        reject(busy());
      }, this.waitMs);
      this.waiting.push(waiter);
      this.next();
    });
  }
}

function busy(): ApiError {
  return new ApiError(
    503,
    'audio_check_busy',
    "The server is checking too many uploads right now (yours or everyone's), so this one was not kept. Send the same upload again in a few seconds (see Retry-After).",
    { retryable: true, retryAfterSeconds: 5 },
  );
}
