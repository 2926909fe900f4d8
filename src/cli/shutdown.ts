import type { Logger } from '../log/index.js';

/**
 * What undoes a start, step by step: run last-first (the HTTP server closes before the database it reads), each
 * step once; a failed step is logged and the next one still runs.
 */
export class Shutdown {
  private readonly steps: (() => Promise<unknown>)[] = [];

  constructor(private readonly log: Logger) {}

  push(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }

  async run(): Promise<void> {
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      await step().catch((err) => this.log.error({ err }, 'shutdown step failed'));
    }
  }
}

/**
 * A stop that takes long by itself (Icecast's, over a second): one step starts it and the shutdown goes on; another
 * step, pushed earlier so that it runs later, waits for it to end.
 */
export class BackgroundStop {
  private stopping: Promise<unknown> = Promise.resolve();

  /** The step that starts the stop. */
  starter(stop: () => Promise<unknown>): () => Promise<void> {
    return async () => {
      this.stopping = stop();
    };
  }

  /** The step that waits for it. */
  readonly waiter = (): Promise<unknown> => this.stopping;
}
