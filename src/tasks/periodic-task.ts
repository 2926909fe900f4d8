import type { Logger } from '../log/index.js';

/**
 * A pass that runs at start and then `intervalMs` after the end of the previous one (never two at once), until
 * stopped. A failed pass is logged and the next one runs as usual: workers must survive a database blip.
 */
export class PeriodicTask {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private started = false;

  constructor(
    private readonly name: string,
    private readonly pass: () => Promise<unknown>,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.started = true;
    this.schedule(0);
  }

  /** Runs a pass soon (after an event that made work), instead of at the next interval. */
  kick(): void {
    if (this.started) this.schedule(0);
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
    this.timer = setTimeout(this.tick, delayMs);
  }

  private readonly tick = (): void => {
    const previous = this.running ?? Promise.resolve();
    this.running = previous
      .then(this.pass)
      .catch((err) => this.log.error({ err }, `${this.name} failed`))
      .finally(() => {
        if (this.started) this.schedule(this.intervalMs);
      });
  };
}
