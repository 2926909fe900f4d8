// Feeds raw PCM to an encoder at the rate it plays. The clock lives here rather than in the
// encoder (`-re`): an `-re` encoder reading straight from one decoder after another starves while
// the next decoder starts (~200 ms of nothing per track change, then a burst), and cannot fill an
// empty playlist with silence. Here, decoders run ahead into a small queue, and when the queue is
// empty the encoder gets silence, so the source never stalls and never disconnects.

export interface PcmPacerOptions {
  bytesPerSecond: number;
  /** Bytes in one sample of every channel; silence is only ever inserted on this boundary. */
  frameBytes: number;
  tickMs?: number;
  /** How far ahead of real time the encoder is fed, to absorb event-loop hiccups. */
  leadMs?: number;
  /** push() waits while more than this much audio is queued. */
  highWaterMs?: number;
}

type Entry = Buffer | (() => void);

export class PcmPacer {
  private queue: Entry[] = [];
  private queuedBytes = 0;
  /** Bytes pushed since the last frame boundary (pipe reads need not end on one). */
  private unaligned = 0;
  private timer?: NodeJS.Timeout;
  private startedAt = 0;
  private written = 0;
  private waiters: Array<() => void> = [];
  private readonly silence: Buffer;
  private readonly tickMs: number;
  private readonly leadBytes: number;
  private readonly highWaterBytes: number;
  /** Silence written so far, in bytes: an empty playlist, or decoders not keeping up. */
  silenceBytes = 0;

  constructor(
    private readonly sink: (pcm: Buffer) => void,
    private readonly options: PcmPacerOptions,
  ) {
    this.tickMs = options.tickMs ?? 20;
    this.leadBytes = this.alignDown(((options.leadMs ?? 200) * options.bytesPerSecond) / 1000);
    this.highWaterBytes = ((options.highWaterMs ?? 2000) * options.bytesPerSecond) / 1000;
    this.silence = Buffer.alloc(this.alignDown(options.bytesPerSecond)); // the most one tick may need
  }

  start(): void {
    if (this.timer) return;
    this.startedAt = performance.now();
    this.written = -this.leadBytes;
    this.timer = setInterval(() => this.tick(), this.tickMs);
    this.tick();
  }

  /** Stops the clock and drops whatever is queued; pending push() calls resolve. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.queue = [];
    this.queuedBytes = 0;
    this.unaligned = 0;
    this.releaseWaiters();
  }

  /** Queues audio; resolves once the queue is below the high-water mark (or the pacer stops). */
  push(pcm: Buffer): Promise<void> {
    if (!this.timer) return Promise.resolve();
    this.queue.push(pcm);
    this.queuedBytes += pcm.length;
    this.unaligned = (this.unaligned + pcm.length) % this.options.frameBytes;
    if (this.queuedBytes <= this.highWaterBytes) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Calls `fn` when playback reaches this point. A partial frame before it is padded so the next audio stays aligned. */
  mark(fn: () => void): void {
    if (!this.timer) return;
    if (this.unaligned) void this.push(Buffer.alloc(this.options.frameBytes - this.unaligned));
    this.queue.push(fn);
  }

  private tick(): void {
    const elapsed = performance.now() - this.startedAt;
    let due = this.alignDown((elapsed / 1000) * this.options.bytesPerSecond) - this.written;
    if (due <= 0) return;
    if (due > this.silence.length) {
      // The event loop was stalled for over a second: skip the lost time rather than burst it out.
      this.written += due - this.silence.length;
      due = this.silence.length;
    }
    const parts: Buffer[] = [];
    const flush = () => {
      if (parts.length > 0) this.sink(parts.length === 1 ? parts[0] : Buffer.concat(parts));
      parts.length = 0;
    };
    // Leave a trailing partial frame queued until the rest of it arrives.
    const takeable = Math.min(due, this.alignDown(this.queuedBytes));
    let taken = 0;
    while (this.queue.length > 0) {
      const head = this.queue[0];
      if (typeof head === 'function') {
        this.queue.shift();
        flush(); // what comes before the mark is written before it fires
        head();
        continue;
      }
      const take = Math.min(head.length, takeable - taken);
      if (take <= 0) break;
      parts.push(head.subarray(0, take));
      taken += take;
      this.queuedBytes -= take;
      if (take === head.length) this.queue.shift();
      else this.queue[0] = head.subarray(take);
    }
    if (taken < due) {
      parts.push(this.silence.subarray(0, due - taken));
      this.silenceBytes += due - taken;
    }
    this.written += due;
    flush();
    if (this.queuedBytes <= this.highWaterBytes) this.releaseWaiters();
  }

  private releaseWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private alignDown(bytes: number): number {
    const { frameBytes } = this.options;
    return Math.floor(bytes / frameBytes) * frameBytes;
  }
}
