/**
 * CORS for browser agents on the public API (not on Icecast's internal callbacks). Any origin may call: access is
 * granted by the bearer key or the payment, never by cookies, so no credentials mode is offered. Preflights are
 * answered before rate limits and authentication; every other answer, errors and 402 included, exposes the payment
 * headers and X-Request-Id.
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';

/** What a browser agent may send, and read back, across origins. */
export const CORS_ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'Idempotency-Key',
  'PAYMENT-SIGNATURE',
  'SIGN-IN-WITH-X',
  'X-Request-Id',
  'Last-Event-ID',
];
export const CORS_EXPOSED_HEADERS = ['PAYMENT-REQUIRED', 'PAYMENT-RESPONSE', 'X-Request-Id', 'Retry-After', 'Location'];
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, DELETE, OPTIONS';
const ALLOWED_HEADERS = CORS_ALLOWED_HEADERS.join(', ');
const EXPOSED_HEADERS = CORS_EXPOSED_HEADERS.join(', ');

/**
 * Any origin may call, and read the payment headers and X-Request-Id (set before the route: routes that write their own
 * answer, MCP and SSE, send them with it).
 */
export function allowAnyOrigin(res: ServerResponse): void {
  // The same for every origin, so no Vary: Origin (a cache may keep one copy for all).
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
}

/** Answers a browser's preflight (true: the request is answered). */
export function answerPreflight(ctx: Context): boolean {
  if (ctx.method !== 'OPTIONS' || !ctx.get('Access-Control-Request-Method')) return false;
  ctx.set('Access-Control-Allow-Methods', ALLOWED_METHODS);
  ctx.set('Access-Control-Allow-Headers', ALLOWED_HEADERS);
  ctx.set('Access-Control-Max-Age', '600');
  ctx.status = 204;
  return true;
}
