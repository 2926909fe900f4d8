import { ApiError } from './api-error.js';

/** The error document of spec 2.8 for one error (also the result of a failed MCP tool call). */
export function errorBody(error: ApiError, requestId: string) {
  return {
    ok: false as const,
    error: {
      code: error.code,
      message: error.message,
      retryable: error.retryable,
      request_id: requestId,
      ...(error.options.details !== undefined && { details: error.options.details }),
    },
  };
}

/** Any failure as the ApiError it is answered with: a client's malformed request 4xx, anything unexpected 500 internal_error. */
export function asApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  const status = (e as { status?: number; expose?: boolean }).status;
  if (status && status >= 400 && status < 500) {
    return new ApiError(
      status,
      'bad_request',
      `The request could not be read (${(e as Error).message}). Send a well-formed HTTP request with a JSON body.`,
    );
  }
  return new ApiError(
    500,
    'internal_error',
    'Something went wrong on our side; nothing was charged. Retry the same request (with the same Idempotency-Key) in a few seconds.',
    { retryable: true, retryAfterSeconds: 2 },
  );
}
