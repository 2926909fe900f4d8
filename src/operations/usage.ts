import type { ServiceRow } from '../services/index.js';
import type { OperationDeps } from './operation-deps.js';

/** What a service used against what was bought, and how it ended when it was stopped. */
export async function usage(deps: OperationDeps, service: ServiceRow) {
  const stopped = deps.refunds && (await deps.refunds.ofService(service.id));
  return { ok: true as const, usage: { ...(await deps.services!.usage(service, deps.media)), ...stopped } };
}
