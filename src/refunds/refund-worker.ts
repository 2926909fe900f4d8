import type { Logger } from '../log/index.js';
import { computeRefund } from './refund-computation.js';
import { finishStop } from './service-stop.js';
import type { RefundDeps } from './refund-deps.js';
import { retryDelaySeconds, sendRefund } from './refund-sending.js';
import { refundChargedFailedOrders } from './charged-failed-orders.js';
import { refundUndeliveredOrders } from './undelivered-orders.js';
import { refundWork } from './refund-work.js';
import { PeriodicTask } from '../tasks/index.js';

/**
 * Sends what is in the refunds outbox, on every instance: refunds are leased (FOR UPDATE SKIP LOCKED) so instances
 * share the work, and a lease that runs out (a killed instance) is taken over; the refund's nonce keeps a second send
 * from paying twice. Also finishes stops an instance did not finish and refunds paid orders that were not delivered,
 * failed orders charged all the same included.
 */
export class RefundWorker {
  private readonly task: PeriodicTask;

  constructor(
    private readonly deps: RefundDeps,
    private readonly log: Logger,
    private readonly options: { intervalMs: number; leaseSeconds: number },
  ) {
    this.task = new PeriodicTask('refund worker', () => this.runOnce(), { intervalMs: options.intervalMs, log });
  }

  start(): void {
    this.task.start();
  }

  /** Runs a pass soon (after a stop), instead of at the next interval. */
  kick(): void {
    this.task.kick();
  }

  async runOnce(): Promise<number> {
    const work = await refundWork(this.deps.db);
    const made = [
      ...(work.provisioning
        ? await refundUndeliveredOrders(this.deps).catch((err) => {
            this.log.warn({ err }, 'could not refund undelivered orders');
            return [];
          })
        : []),
      ...(work.unchecked
        ? await refundChargedFailedOrders(this.deps).catch((err) => {
            this.log.warn({ err }, 'could not look up failed orders on chain');
            return [];
          })
        : []),
    ];
    // The refunds this pass made are sent by it, as those it found due.
    const due = work.due || made.length ? await this.deps.store.leaseDue(10, this.options.leaseSeconds) : [];
    for (const refund of due) {
      try {
        if (refund.status === 'computing') {
          const [service] = refund.service_id
            ? await this.deps.db.query<{ id: string; mount: string }>('SELECT id, mount FROM services WHERE id = $1', [
                refund.service_id,
              ])
            : [];
          const computed =
            refund.reason === 'stopped'
              ? service && (await finishStop(this.deps, refund, service))
              : await computeRefund(this.deps, refund.id);
          if (computed?.status === 'pending') await sendRefund(this.deps, computed);
        } else {
          await sendRefund(this.deps, refund);
        }
      } catch (err) {
        const delay = retryDelaySeconds(refund.attempts);
        this.deps.metrics?.refunds.inc({ result: 'error' });
        this.log.warn({ refund_id: refund.id, err, retry_in_seconds: delay }, 'refund not sent; will retry');
        await this.deps.store
          .postpone(
            refund.id,
            `not sent yet (${(err as Error).message.split('\n')[0].slice(0, 200)}); retried in ${delay} s`,
            delay,
          )
          .catch(() => undefined);
      }
    }
    return due.length;
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
