import type { Context, Middleware, Next } from 'koa';
import { closeIfBodyUnread } from './close-unread-body.js';
import type { ConnectionCap } from './connection-cap.js';
import { cors } from './cors.js';
import { errorDocuments, type ErrorLogger } from './error-document.js';
import { assignRequestId } from './request-id.js';

export interface EnvelopeParts {
  logError: ErrorLogger;
  /** Sets the client address from X-Forwarded-For behind trusted proxies. */
  clientAddress?: (ctx: Context) => void;
  connections?: ConnectionCap;
  /** Throws the 429 when the caller is over its rate. */
  rateLimit?: (ctx: Context) => void;
  /** Counts and times the answered request. */
  record?: (ctx: Context, started: bigint) => void;
  /** Icecast's callbacks: answered by their own routes, without CORS or rate limits (other paths under the prefix go on). */
  internal?: { prefix: string; routes: Middleware };
}

/**
 * What every request goes through around its route, in this order: client address, request id, CORS (a preflight is
 * answered here), the connection cap, rate limits, then the route, with any failure answered as an error document;
 * once answered, the request is counted and timed, and a connection with an unread body is closed.
 *
 * One middleware rather than a chain of them: each Koa middleware layer costs promises and closures per request,
 * which on the cheapest routes (GET /products) was a measurable share of the CPU.
 */
export function envelope(parts: EnvelopeParts): Middleware {
  const answerErrors = errorDocuments(parts.logError);
  const { connections, rateLimit, record, internal } = parts;
  const internalPath = internal && `${internal.prefix}/`;
  // Made once, not per request: the hot path allocates no closures of its own.
  const publicRoute = (ctx: Context, next: Next) => {
    connections?.check(ctx);
    rateLimit?.(ctx);
    return next();
  };
  const internalRoute = (ctx: Context, next: Next) => {
    connections?.check(ctx);
    return internal!.routes(ctx, () => {
      rateLimit?.(ctx);
      return next();
    });
  };
  return async function aroundRoute(ctx: Context, next: Next): Promise<void> {
    parts.clientAddress?.(ctx);
    assignRequestId(ctx);
    const started = process.hrtime.bigint();
    try {
      if (internalPath && ctx.path.startsWith(internalPath)) {
        await answerErrors(ctx, next, internalRoute);
      } else if (!cors.allow(ctx)) {
        await answerErrors(ctx, next, publicRoute);
      }
    } finally {
      record?.(ctx, started);
      closeIfBodyUnread(ctx);
    }
  };
}
