import type { EventEmitter } from 'node:events';

/** A supervised process to start again: how to start and stop it, whether a stop came, and where to report. */
export interface Relaunchable {
  /** Emits `restarted` (what `launch` gave and the attempt's number) and `restartFailed` (the error). */
  events: EventEmitter;
  launch(): Promise<object>;
  stop(): Promise<void>;
  /** True once a stop came: no further try, and a process a try started meanwhile is stopped. */
  stopped(): boolean;
}

export interface RestartDelays {
  /** The first restart's delay, doubled for each one after it (up to `max`). */
  min: number;
  /** The longest delay between two restarts. */
  max: number;
}

/** A run of a supervised process this long counts as healthy: the restart after it waits the shortest delay again. */
const HEALTHY_RUN_MS = 30_000;

/**
 * When a supervised process (Icecast, HAProxy, nginx, an AutoDJ encoder) that ended by itself is started again: after
 * `min` ms, then twice as long after each further failure, up to `max`, so a process that cannot run does not spin
 * while one that crashed once is back at once.
 */
export class RestartBackoff {
  private attempt = 0;
  private timer?: NodeJS.Timeout;

  constructor(private readonly delays: RestartDelays = { min: 100, max: 10_000 }) {}

  /** Calls `restart` with the attempt's number (1 for the first) after this attempt's delay. */
  schedule(restart: (attempt: number) => void): void {
    const delay = Math.min(this.delays.max, this.delays.min * 2 ** this.attempt);
    const attempt = ++this.attempt;
    this.timer = setTimeout(() => restart(attempt), delay);
  }

  /** Starts the process again after this attempt's delay, and again after each failed start, until one succeeds. */
  relaunch(supervised: Relaunchable): void {
    this.schedule(async (attempt) => {
      if (supervised.stopped()) return;
      try {
        const started = await supervised.launch();
        if (supervised.stopped()) return void (await supervised.stop());
        supervised.events.emit('restarted', { ...started, attempt });
      } catch (error) {
        if (supervised.stopped()) return;
        supervised.events.emit('restartFailed', error as Error);
        this.relaunch(supervised);
      }
    });
  }

  /** The process that ended had run since `startedAt` (ms): after a healthy run, the count starts again. */
  ranSince(startedAt: number): void {
    if (Date.now() - startedAt > HEALTHY_RUN_MS) this.reset();
  }

  reset(): void {
    this.attempt = 0;
  }

  /** No restart is pending after this (a stop). */
  cancel(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
