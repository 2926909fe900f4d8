import type { Logger } from '../log/index.js';
import { PeriodicTask } from '../tasks/index.js';
import { advance, PaymentNotTaken, type AdvanceDeps } from './advance.js';
import type { OrderStore } from './order-store.js';

/** Orders recovery advances at once: a hung facilitator call holds one place, not recovery. */
const RECOVERY_CONCURRENCY = 4;

/**
 * Finishes orders a request could not: a crash between states, an unknown settlement outcome, a failed provisioning.
 * Runs at start and then periodically; leases (FOR UPDATE SKIP LOCKED) keep instances from working on the same order.
 * A pass starts what is due and does not wait for it: orders whose facilitator hangs (up to
 * X402_FACILITATOR_TIMEOUT_MS) hold their places only, and the next pass leases what came due meanwhile. Stopping
 * gives up the facilitator calls still waiting (their orders stay settling for the next start, or another instance,
 * to finish from the chain).
 */
export class OrderRecovery {
  private readonly task: PeriodicTask;

  constructor(
    private readonly orders: OrderStore,
    private readonly deps: AdvanceDeps,
    private readonly log: Logger,
    private readonly options: { intervalMs: number; leaseSeconds: number },
  ) {
    this.task = new PeriodicTask('order recovery', () => this.runOnce(), { intervalMs: options.intervalMs, log });
  }

  start(): void {
    this.task.start();
  }

  async runOnce(): Promise<number> {
    const room = RECOVERY_CONCURRENCY - this.inFlight.size;
    if (room <= 0 || this.stopping) return 0;
    const ids = await this.orders.leaseStale(room, this.options.leaseSeconds);
    for (const id of ids) {
      if (this.inFlight.has(id)) continue; // its lease ran out while it was being advanced: it still is
      this.inFlight.set(
        id,
        this.recover(id).finally(() => this.inFlight.delete(id)),
      );
    }
    return ids.length;
  }

  private stopping = false;
  private readonly inFlight = new Map<string, Promise<void>>();

  private async recover(id: string): Promise<void> {
    try {
      const order = await this.orders.byId(id);
      if (!order) return;
      const result = await advance(order, this.deps, 'recovery');
      this.log.info({ order_id: id, state: result.order.state }, 'order recovered');
    } catch (err) {
      if (err instanceof PaymentNotTaken) return; // failed for good, and logged as such
      this.log.warn({ order_id: id, err }, 'order still unfinished; will retry');
    }
  }

  /** No new pass; facilitator calls still waiting give up (the service is stopping), then the orders under way end. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.deps.checkout.close();
    await this.task.stop();
    await Promise.all(this.inFlight.values());
  }
}
