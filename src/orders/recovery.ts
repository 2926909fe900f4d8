import type { Logger } from '../log/index.js';
import { PeriodicTask } from '../tasks/index.js';
import { advance, PaymentNotTaken, type AdvanceDeps } from './advance.js';
import type { OrderStore } from './order-store.js';

/**
 * Finishes orders a request could not: a crash between states, an unknown settlement outcome, a failed provisioning.
 * Runs at start and then periodically; leases (FOR UPDATE SKIP LOCKED) keep instances from working on the same order.
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
    for (const id of ids) {
      const order = await this.orders.byId(id);
      if (!order) continue;
      try {
        const result = await advance(order, this.deps, 'recovery');
        this.log.info({ order_id: id, state: result.order.state }, 'order recovered');
      } catch (err) {
        if (err instanceof PaymentNotTaken) continue; // failed for good, and logged as such
        this.log.warn({ order_id: id, err }, 'order still unfinished; will retry');
      }
    }
    return ids.length;
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
