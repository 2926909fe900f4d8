import type { Context, Next } from 'koa';
import { ApiError, asApiError, errorBody } from '../errors/index.js';
import { clientGone } from '../observability/index.js';
import { paymentRequiredFields } from './payment-required-body.js';

export interface ErrorLogger {
  (fields: Record<string, unknown>, message: string): void;
}

/**
 * Runs the request's route and turns every failure into the error document of spec 2.8; an unexpected failure is
 * logged and answered 500, retryable.
 */
export function errorDocuments(logError: ErrorLogger) {
  return async function answerErrors(
    ctx: Context,
    next: Next,
    route: (ctx: Context, next: Next) => Promise<unknown>,
  ): Promise<void> {
    try {
      await route(ctx, next);
      if (ctx.status === 404 && ctx.body === undefined)
        throw new ApiError(
          404,
          'route_not_found',
          `There is no ${ctx.method} ${ctx.path}. GET /api/v1/openapi.json lists every operation.`,
        );
      if ((ctx.status === 405 || ctx.status === 501) && !ctx.state.errorSent)
        throw new ApiError(
          405,
          'method_not_allowed',
          `${ctx.method} is not allowed on ${ctx.path}; allowed: ${ctx.response.get('Allow')}.`,
        );
    } catch (e) {
      // The client hung up (e.g. mid-body): nobody is left to answer, and it is not our failure (counted as 499).
      if (clientGone(ctx.res)) return;
      const error = asApiError(e);
      if (!(e instanceof ApiError) && error.status >= 500)
        logError({ err: e, request_id: ctx.state.requestId, path: ctx.path }, 'request failed');
      sendError(ctx, error);
    }
  };
}

export function sendError(ctx: Context, error: ApiError): void {
  ctx.status = error.status;
  const { retryAfterSeconds, paymentRequired, bearerChallenge, headers } = error.options;
  if (retryAfterSeconds !== undefined) ctx.set('Retry-After', String(retryAfterSeconds));
  if (paymentRequired) ctx.set('PAYMENT-REQUIRED', paymentRequired);
  if (bearerChallenge) ctx.set('WWW-Authenticate', 'Bearer realm="agent-audio-api"');
  for (const [name, value] of Object.entries(headers ?? {})) ctx.set(name, value);
  ctx.state.errorSent = true;
  const required = error.status === 402 ? paymentRequired : undefined;
  const fields = required ? paymentRequiredFields(required) : undefined;
  ctx.body = fields ? { ...errorBody(error, ctx.state.requestId), ...fields } : errorBody(error, ctx.state.requestId);
}
