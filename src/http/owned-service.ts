import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { ownedService } from '../operations/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';
import { callerOf, type CallerDeps } from './caller.js';

const serviceId = /^[a-zA-Z0-9_-]{8,120}$/;

/** The service of a /services/{service_id}/… route, when the caller owns it (its API key or its paying wallet). */
export async function ownedServiceOf(
  ctx: Context,
  deps: CallerDeps & { services?: ServiceRecords },
): Promise<ServiceRow> {
  const id = ctx.params.service_id;
  // Before the caller: a wallet's sign-in challenge names the requested URL, and one with a huge made-up id would
  // not fit in a response header.
  if (!serviceId.test(id) || !deps.services) throw serviceNotFound();
  const caller = await callerOf(ctx, deps, 'A service bought with this API key or paid by this wallet');
  const service = await ownedService(deps.services, caller, id);
  if (!service) throw serviceNotFound();
  return service;
}

function serviceNotFound(): ApiError {
  return new ApiError(
    404,
    'service_not_found',
    'There is no service with this id for your API key or wallet. Use service.service_id from your order; ' +
      'GET /services lists yours.',
  );
}
