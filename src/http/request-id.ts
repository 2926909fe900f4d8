import type { Context } from 'koa';
import { randomId } from '../ids/index.js';

const acceptable = /^[A-Za-z0-9._:-]{1,128}$/;

/** Every response carries X-Request-Id: the caller's own when it is sensible, a new one otherwise. */
export function assignRequestId(ctx: Context): void {
  const given = ctx.get('X-Request-Id');
  ctx.state.requestId = acceptable.test(given) ? given : randomId('req_', 12);
  ctx.set('X-Request-Id', ctx.state.requestId);
}
