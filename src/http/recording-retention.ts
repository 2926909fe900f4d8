import type Router from '@koa/router';
import type { Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { ListenPages } from '../listen/index.js';
import { type OperationDeps, retainRecordings } from '../operations/index.js';
import { retentionRequestSchema } from '../operations/request-schemas.js';
import { ownedServiceOf } from './owned-service.js';
import { sendPlaced } from './paid-call.js';
import { recordingDocument } from './recordings-documents.js';
import { bodyReader } from './request-body.js';
import { idempotencyKey } from './idempotency-key.js';

export interface RetentionRouteDeps extends OperationDeps {
  keys: ApiKeys;
  callers?: Callers;
  publicBaseUrl: () => string;
  listen?: ListenPages;
}

const readRetention = bodyReader<{ retention_days: number; recording_ids?: string[] }>(
  retentionRequestSchema,
  'retention request',
);

/**
 * Recordings kept past their service's end, bought by the owner like an extension: 402 with the price, then paid
 * with x402; the answer is the order and the service, with the recordings as they are kept now.
 */
export function recordingRetentionRoutes(router: Router, deps: RetentionRouteDeps): void {
  router.post('/services/:service_id/recordings/retention', async (ctx) => {
    const service = await ownedServiceOf(ctx, deps);
    const idempotency = idempotencyKey(ctx, true)!;
    const body = await readRetention(ctx);
    const payment = {
      signature: ctx.get('PAYMENT-SIGNATURE') || undefined,
      resourceUrl: `${deps.publicBaseUrl()}/services/${service.id}/recordings/retention`,
    };
    const placed = await retainRecordings(deps, {
      service,
      idempotencyKey: idempotency,
      days: body.retention_days,
      recordingIds: body.recording_ids,
      payment,
    });
    sendPlaced(ctx, placed);
    const kept = deps.listen ? await deps.listen.recordings.list(service.id, true) : [];
    ctx.body = { ...placed.body, recordings: kept.map((r) => recordingDocument(deps.publicBaseUrl(), r)) };
  });
}
