import { ApiError } from '../errors/index.js';

interface Waiter {
  owner: string;
  turn: () => void;
}

/**
 * Bounds how many audio checks (ffprobe, a test decode) run at once on this instance: a few run, a few wait their
 * turn for a bounded time, and the rest are turned away at once with a retryable 503. One buyer (`owner`) may hold at
 * most half the slots and half the queue, so a buyer whose files are slow to check cannot make everybody else's wait.
 */
export class ProbeSlots {
  private running = 0;
  private readonly byOwner = new Map<string, { running: number; waiting: number }>();
  private readonly waiting: Waiter[] = [];
  private readonly perOwner: number;
  private readonly perOwnerQueue: number;

  constructor(
    private readonly max: number,
    private readonly queueMax: number,
    private readonly waitMs: number,
  ) {
    this.perOwner = Math.max(1, Math.ceil(max / 2));
    this.perOwnerQueue = Math.max(1, Math.ceil(queueMax / 2));
  }

  /** Throws the retryable 503 when a new check of this owner would be turned away now. */
  refuseIfFull(owner: string): void {
    if (!this.mayRun(owner) && !this.mayWait(owner)) throw busy();
  }

  async run<T>(owner: string, work: () => Promise<T>): Promise<T> {
    await this.acquire(owner);
    try {
      return await work();
    } finally {
      this.running--;
      this.count(owner).running--;
      this.forget(owner);
      const next = this.waiting.findIndex((w) => this.mayRun(w.owner));
      if (next >= 0) this.waiting.splice(next, 1)[0].turn();
    }
  }

  private mayRun(owner: string): boolean {
    return this.running < this.max && (this.byOwner.get(owner)?.running ?? 0) < this.perOwner;
  }

  private mayWait(owner: string): boolean {
    return this.waiting.length < this.queueMax && (this.byOwner.get(owner)?.waiting ?? 0) < this.perOwnerQueue;
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

  private acquire(owner: string): Promise<void> {
    if (this.mayRun(owner)) {
      this.running++;
      this.count(owner).running++;
      return Promise.resolve();
    }
    if (!this.mayWait(owner)) return Promise.reject(busy());
    this.count(owner).waiting++;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        owner,
        turn: () => {
          clearTimeout(timer);
          const count = this.count(owner);
          count.waiting--;
          count.running++;
          this.running++;
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
