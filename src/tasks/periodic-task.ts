import type { Logger } from '../log/index.js';

export interface PeriodicTaskOptions {
  intervalMs: number;
  /** Where failed passes are logged. */
  log: Logger;
  /** A kick runs a pass no sooner than this after the previous one began: kicks in a burst share passes. */
  kickGapMs?: number;
}

/**
 * A pass that runs at start and then `intervalMs` after the end of the previous one (never two at once), until
 * stopped. A failed pass is logged and the next one runs as usual: workers must survive a database blip.
 */
export class PeriodicTask {
  private timer?: NodeJS.Timeout;
  /** When the scheduled pass is due (ms since epoch). */
  private dueAt = 0;
  private lastStartedAt = 0;
  private running?: Promise<unknown>;
  private started = false;

  private readonly intervalMs: number;
  private readonly log: Logger;
  private readonly kickGapMs: number;

  constructor(
    private readonly name: string,
    private readonly pass: () => Promise<unknown>,
    { intervalMs, log, kickGapMs = 0 }: PeriodicTaskOptions,
  ) {
    this.intervalMs = intervalMs;
    this.log = log;
    this.kickGapMs = kickGapMs;
  }

  start(): void {
    this.started = true;
    this.schedule(0);
  }

  /** Runs a pass soon (after an event that made work), instead of at the next interval. */
  kick(): void {
    if (!this.started) return;
    const delayMs = Math.max(0, this.lastStartedAt + this.kickGapMs - Date.now());
    if (!this.timer || Date.now() + delayMs < this.dueAt) this.schedule(delayMs);
  }

  /** Stops the schedule and waits for a pass under way. */
  async stop(): Promise<void> {
    this.started = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.dueAt = Date.now() + delayMs;
    this.timer = setTimeout(this.tick, delayMs);
  }

  private readonly tick = (): void => {
    this.timer = undefined;
    const previous = this.running ?? Promise.resolve();
    this.running = previous
      .then(() => {
        this.lastStartedAt = Date.now();
        return this.pass();
      })
      .catch((err) => this.log.error({ err }, `${this.name} failed`))
      .finally(() => {
        // A kick during the pass may have asked for the next one sooner.
        if (this.started && !(this.timer && this.dueAt <= Date.now() + this.intervalMs)) this.schedule(this.intervalMs);
      });
  };
}
