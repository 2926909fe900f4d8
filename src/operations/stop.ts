import type { ServiceRow } from '../services/index.js';
import type { OperationDeps } from './operation-deps.js';
import { stopNotAvailable } from './refusals.js';

/** Stops a service for good and refunds its unused paid time; asked again, the same stop and refund. */
export async function stop(deps: OperationDeps, service: ServiceRow) {
  if (!deps.refunds) throw stopNotAvailable();
  const stopped = await deps.refunds.stop(service);
  const now = await deps.services!.byId(service.id);
  return {
    ok: true as const,
    service: deps.services!.document(now ?? service),
    ended: { reason: stopped.reason, stopped_at: stopped.stopped_at },
    refund: stopped.refund,
    idempotent_replay: stopped.idempotent_replay,
  };
}
