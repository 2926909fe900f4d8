import type { ServiceRow } from '../services/index.js';
import type { OperationDeps } from './operation-deps.js';

/** A service as its owner reads it: its document, why it is in its status, and the evaluations that priced it. */
export async function status(deps: OperationDeps, service: ServiceRow) {
  return {
    ok: true as const,
    service: deps.services!.document(service),
    ...(service.status_reason && { status_reason: service.status_reason }),
    ...(deps.orders && (await deps.orders.pricedBy(service))),
  };
}
