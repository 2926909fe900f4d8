import { recordEvent } from '../events/index.js';
import { crashPoint } from '../orders/index.js';
import { ApiError } from '../errors/index.js';
import { transitionService } from '../services/index.js';
import { cutMount } from './mount-cut.js';
import { computeRefund } from './refund-computation.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

export const STOPPED_REASON = 'Stopped by its owner; the unused share of what was paid is refunded.';

export interface StoppableService {
  id: string;
  api_key_id: string;
  mount: string;
  status: string;
}

/**
 * Stops a service at its owner's request. In order, each step committed before the next: the service ends (expired,
 * stopped_at) with its refund in the outbox, in one transaction, so Icecast's URL-auth callbacks refuse its source and
 * listeners from then on; the mount is cut; only then is the refund computed and committed. A repeated stop finds
 * the same refund. An instance killed in between leaves a refund that the worker finishes (cut, compute, send).
 */
export async function stopService(
  deps: RefundDeps,
  service: StoppableService,
): Promise<{ refund: RefundRow; stoppedAt: Date; repeated: boolean }> {
  const stopped = await deps.db.transaction(async (client) => {
    const {
      rows: [now],
    } = await client.query('SELECT status, stopped_at FROM services WHERE id = $1 FOR UPDATE', [service.id]);
    const existing = await deps.store.stopOf(service.id, client);
    if (existing) return { refund: existing, repeated: true };
    if (now.status !== 'active' && now.status !== 'suspended') {
      throw new ApiError(
        409,
        'service_not_running',
        `The service is ${String(now.status)}, so there is nothing to stop and nothing to refund. GET /services/{service_id}/usage shows how it ended.`,
      );
    }
    const ended = await transitionService<{ stopped_at: Date }>(client, {
      serviceId: service.id,
      kind: 'stop',
      from: now.status,
      reason: STOPPED_REASON,
      compute: { stopped_at: 'now()' },
    });
    const refund = await deps.store.insertStop(client, service, ended!.stopped_at, deps.settings.leaseSeconds);
    await recordEvent(client, {
      type: 'service.stopped',
      serviceId: service.id,
      data: { reason: 'stopped', stopped_at: ended!.stopped_at.toISOString(), refund_id: refund.id },
    });
    return { refund, repeated: false };
  });
  crashPoint('refund_after_stop');
  let refund = stopped.refund;
  if (refund.status === 'computing') refund = await finishStop(deps, refund, service);
  return { refund, stoppedAt: refund.as_of, repeated: stopped.repeated };
}

/** The cut, then the refund's amount: also what the worker does for a stop an instance did not finish. */
export async function finishStop(
  deps: RefundDeps,
  refund: RefundRow,
  service: { id: string; mount: string },
): Promise<RefundRow> {
  await cutMount(deps.cutter, service, deps.log);
  return computeRefund(deps, refund.id);
}
