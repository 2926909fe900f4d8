import { refundView, type RefundView } from './refund-view.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';
import { stopService, type StoppableService } from './service-stop.js';
import { RefundRequests } from './refund-requests.js';

export interface StopOutcome {
  stopped_at: string;
  reason: 'stopped';
  refund: RefundView;
  idempotent_replay: boolean;
}

/** The refunds room's front: stop a service, read refunds for services and orders, operator approval. */
export class Refunds {
  /** Refund requests in the form of x402's proposed refund extension, answered with the stop's refund. */
  readonly requests: RefundRequests;

  constructor(
    private readonly deps: RefundDeps,
    private readonly wake: () => void = () => {},
  ) {
    this.requests = new RefundRequests(deps.db);
  }

  async stop(service: StoppableService): Promise<StopOutcome> {
    const { refund, stoppedAt, repeated } = await stopService(this.deps, service);
    if (refund.status === 'pending' || refund.status === 'split') this.wake();
    return {
      stopped_at: stoppedAt.toISOString(),
      reason: 'stopped',
      refund: await this.view(refund),
      idempotent_replay: repeated,
    };
  }

  /** How a service ended and its refund, when it was stopped. */
  async ofService(
    serviceId: string,
  ): Promise<{ ended: { reason: 'stopped'; stopped_at: string }; refund: RefundView } | undefined> {
    const refund = await this.deps.store.stopOf(serviceId);
    return (
      refund && {
        ended: { reason: 'stopped', stopped_at: refund.as_of.toISOString() },
        refund: await this.view(refund),
      }
    );
  }

  async ofOrder(orderId: string): Promise<RefundView[]> {
    return Promise.all((await this.deps.store.forOrder(orderId)).map((r) => this.view(r)));
  }

  async byId(id: string): Promise<RefundView | undefined> {
    const row = await this.deps.store.byId(id);
    return row && this.view(row);
  }

  view(row: RefundRow): Promise<RefundView> {
    return refundView(this.deps, row);
  }

  list(limit?: number): Promise<RefundRow[]> {
    return this.deps.store.list(limit);
  }

  async approve(id: string, by: string): Promise<RefundRow[]> {
    const approved = await this.deps.store.approve(id, by);
    if (approved.length) this.wake();
    return approved;
  }
}
