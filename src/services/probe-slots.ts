import { ApiError } from '../errors/index.js';

/**
 * Bounds how many audio checks (ffprobe, a test decode) run at once on this instance: a few run, a few wait their
 * turn for a bounded time, and the rest are turned away at once with a retryable 503.
 */
export class ProbeSlots {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly max: number, private readonly queueMax: number, private readonly waitMs: number) {}

  /** Throws the retryable 503 when a new check would be turned away now. */
  refuseIfFull(): void {
    if (this.running >= this.max && this.waiting.length >= this.queueMax) throw busy();
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await work();
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }

  private acquire(): Promise<void> {
    if (this.running < this.max) {
      this.running++;
      return Promise.resolve();
    }
    if (this.waiting.length >= this.queueMax) return Promise.reject(busy());
    return new Promise((resolve, reject) => {
      const turn = () => {
        clearTimeout(timer);
        this.running++;
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(turn), 1);
        reject(busy());
      }, this.waitMs);
      this.waiting.push(turn);
    });
  }
}

function busy(): ApiError {
  return new ApiError(503, 'audio_check_busy', 'The server is checking too many uploads right now, so this one was not kept. Send the same upload again in a few seconds (see Retry-After).',
    { retryable: true, headers: { 'Retry-After': '5' } });
}
