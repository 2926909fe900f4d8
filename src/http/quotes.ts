import type Router from '@koa/router';
import { KeyRevoked, type ApiKeys } from '../keys/index.js';
import type { Metrics } from '../observability/index.js';
import type { PriceInput } from '../pricing/index.js';
import type { QuoteService } from '../quotes/index.js';
import { idempotencyKey } from './idempotency-key.js';
import { bodyReader } from './request-body.js';
import { quoteRequestSchema } from './schemas.js';

const readQuoteRequest = bodyReader<{
  product_id: string;
  parameters?: Record<string, unknown>;
  billing?: PriceInput['billing'];
}>(quoteRequestSchema, 'quote request');

export function quoteRoutes(router: Router, deps: { keys: ApiKeys; quotes: QuoteService; metrics?: Metrics }): void {
  router.post('/quotes', async (ctx) => {
    const authorization = ctx.get('Authorization') || undefined;
    const key = await deps.keys.authenticateForWrite(authorization);
    const idempotency = idempotencyKey(ctx, false);
    const body = await readQuoteRequest(ctx);
    const { quoteText, replayed } = await deps.quotes
      .create({
        apiKeyId: key.id,
        idempotencyKey: idempotency,
        input: {
          product_id: body.product_id,
          parameters: body.parameters ?? {},
          ...(body.billing && { billing: body.billing }),
        },
      })
      .catch((e) => {
        throw e instanceof KeyRevoked ? deps.keys.revokedDuringRequest(authorization) : e;
      });
    if (!replayed) deps.metrics?.quotes.inc({ product: body.product_id });
    // The quote's text as it was made (or stored, for a replay), not parsed and serialized again.
    ctx.type = 'application/json';
    ctx.body = `{"ok":true,"quote":${quoteText}${idempotency === undefined ? '' : `,"idempotency":${JSON.stringify({ key: idempotency, replayed })}`}}`;
  });
}
