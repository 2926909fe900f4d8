import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context, Middleware, Next } from 'koa';
import type { AnsweredRequest } from '../observability/index.js';
import { closeIfBodyUnread, hasUnreadBody } from './close-unread-body.js';
import type { ConnectionCap } from './connection-cap.js';
import { allowAnyOrigin, answerPreflight } from './cors.js';
import { errorDocuments, type ErrorLogger } from './error-document.js';
import type { RateLimiter } from './rate-limit.js';
import { assignRequestId } from './request-id.js';

export interface EnvelopeParts {
  logError: ErrorLogger;
  /** The client address behind trusted proxies (X-Forwarded-For); without it, the peer's. */
  addressOf?: (req: IncomingMessage) => string;
  connections?: ConnectionCap;
  rateLimiter?: RateLimiter;
  /** Counts and times the answered request. */
  record?: (answered: AnsweredRequest, started: bigint) => void;
  /**
   * Icecast's callbacks: answered by their own routes, without CORS or rate limits (other paths under the prefix go
   * on).
   */
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
  const { addressOf, connections, rateLimiter, record, internal } = parts;
  const internalPath = internal && `${internal.prefix}/`;
  // Made once, not per request: the hot path allocates no closures of its own.
  const publicRoute = (ctx: Context, next: Next) => {
    connections?.check(ctx);
    rateLimiter?.check(ctx);
    return next();
  };
  const internalRoute = (ctx: Context, next: Next) => {
    connections?.check(ctx);
    return internal!.routes(ctx, () => {
      rateLimiter?.check(ctx);
      return next();
    });
  };
  return async function aroundRoute(ctx: Context, next: Next): Promise<void> {
    if (addressOf) ctx.request.ip = addressOf(ctx.req);
    ctx.state.requestId = assignRequestId(ctx.req, ctx.res);
    const started = process.hrtime.bigint();
    try {
      if (internalPath && ctx.path.startsWith(internalPath)) {
        await answerErrors(ctx, next, internalRoute);
      } else {
        allowAnyOrigin(ctx.res);
        if (!answerPreflight(ctx)) await answerErrors(ctx, next, publicRoute);
      }
    } finally {
      record?.(
        {
          route: (ctx as Context & { _matchedRoute?: string })._matchedRoute ?? 'unmatched',
          method: ctx.method,
          status: ctx.status,
          res: ctx.res,
          requestId: ctx.state.requestId,
          orderId: ctx.state.orderId,
        },
        started,
      );
      closeIfBodyUnread(ctx);
    }
  };
}

/** A document answered whole, without a route: its metrics route and its bytes. */
export interface FixedAnswer {
  route: string;
  body: Buffer;
}

/**
 * GET and HEAD of documents that need no route (the catalog's), answered straight from Node's request: the same
 * request id, CORS headers, connection cap, rate limit and metrics as the envelope, without Koa's per-request objects
 * (the cheapest, most read answers spent most of their CPU there). Anything else, and any request the envelope would
 * refuse or treat apart (over the cap or the rate, with a body, a document not built yet), returns false: the Koa app
 * answers it.
 */
export function fixedAnswers(parts: EnvelopeParts, answerFor: (url: string) => FixedAnswer | undefined) {
  const { addressOf, connections, rateLimiter, record } = parts;
  return function answer(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    const fixed = answerFor(req.url ?? '');
    if (!fixed || hasUnreadBody(req) || connections?.isOver(req.socket)) return false;
    if (
      rateLimiter &&
      rateLimiter.wait(addressOf ? addressOf(req) : (req.socket.remoteAddress ?? ''), req.headers.authorization) > 0
    )
      return false;
    const started = process.hrtime.bigint();
    const requestId = assignRequestId(req, res);
    allowAnyOrigin(res);
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', fixed.body.length);
    res.end(fixed.body); // no body is sent for HEAD
    record?.({ route: fixed.route, method: req.method, status: 200, res, requestId }, started);
    return true;
  };
}
