import type Router from '@koa/router';
import { ApiError } from '../errors/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { ServiceRecords } from '../services/index.js';

const serviceId = /^[a-zA-Z0-9_-]{8,120}$/;

export function serviceRoutes(router: Router, deps: { keys: ApiKeys; services?: ServiceRecords }): void {
  router.get('/services/:service_id', async (ctx) => {
    const key = await deps.keys.authenticate(ctx.get('Authorization') || undefined);
    const id = ctx.params.service_id;
    const service = serviceId.test(id) && deps.services ? await deps.services.owned(key.id, id) : undefined;
    if (!service) throw new ApiError(404, 'service_not_found', 'There is no service with this id for your API key. Use service.service_id from your order.');
    ctx.body = { ok: true, service: deps.services!.document(service) };
  });
}
