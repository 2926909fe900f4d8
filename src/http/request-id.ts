import type { Context } from 'koa';
import { randomId } from '../ids/index.js';

const acceptable = /^[A-Za-z0-9._:-]{1,128}$/;

/** Every response carries X-Request-Id: the caller's own when it is sensible, a new one otherwise. */
export function assignRequestId(ctx: Context): void {
  const given = ctx.req.headers['x-request-id'];
  const id = typeof given === 'string' && acceptable.test(given) ? given : randomId('req_', 12);
  ctx.state.requestId = id;
  ctx.res.setHeader('X-Request-Id', id);
}
