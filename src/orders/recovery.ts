import type { Logger } from '../log/index.js';
import { PeriodicTask } from '../tasks/index.js';
import { advance, PaymentNotTaken, type AdvanceDeps } from './advance.js';
import type { OrderStore } from './order-store.js';

/** Orders one recovery pass advances at once: a hung facilitator call holds one place, not the whole pass. */
const RECOVERY_CONCURRENCY = 4;

/**
 * Finishes orders a request could not: a crash between states, an unknown settlement outcome, a failed provisioning.
 * Runs at start and then periodically; leases (FOR UPDATE SKIP LOCKED) keep instances from working on the same order.
 * A pass advances a few orders at once, so one whose facilitator hangs (up to X402_FACILITATOR_TIMEOUT_MS) does not
 * hold the others; stopping gives up the facilitator calls still waiting (their orders stay settling for the next
 * start, or another instance, to finish from the chain).
 */
export class OrderRecovery {
  private readonly task: PeriodicTask;

  constructor(
    private readonly orders: OrderStore,
    private readonly deps: AdvanceDeps,
    private readonly log: Logger,
    private readonly options: { intervalMs: number; leaseSeconds: number },
  ) {
    this.task = new PeriodicTask('order recovery', () => this.runOnce(), options.intervalMs, log);
  }

  start(): void {
    this.task.start();
  }

  async runOnce(): Promise<number> {
    const ids = await this.orders.leaseStale(10, this.options.leaseSeconds);
    let next = 0;
    const worker = async () => {
      while (next < ids.length && !this.stopping) await this.recover(ids[next++]);
    };
    await Promise.all(Array.from({ length: Math.min(RECOVERY_CONCURRENCY, ids.length) }, worker));
    return ids.length;
  }

  private stopping = false;

  private async recover(id: string): Promise<void> {
    const order = await this.orders.byId(id);
    if (!order) return;
    try {
      const result = await advance(order, this.deps, 'recovery');
      this.log.info({ order_id: id, state: result.order.state }, 'order recovered');
    } catch (err) {
      if (err instanceof PaymentNotTaken) return; // failed for good, and logged as such
      this.log.warn({ order_id: id, err }, 'order still unfinished; will retry');
    }
  }

  /** No new pass; facilitator calls still waiting give up (the service is stopping), then the pass under way ends. */
  stop(): Promise<void> {
    this.stopping = true;
    this.deps.gateway.close();
    return this.task.stop();
  }
}
