import type { IncomingMessage, ServerResponse } from 'node:http';
import { assignRequestId } from './request-id.js';

/**
 * What the HTTP server answers between listening and the application being ready (a second or two at start, on a
 * port given by PORT): 503 and when to retry, as an error document, never a request left hanging.
 */
export function answerStarting(req: IncomingMessage, res: ServerResponse): void {
  const requestId = assignRequestId(req, res);
  const message = 'The service is starting. Retry this same request in a second.';
  const body = JSON.stringify({
    ok: false,
    error: { code: 'starting', message, retryable: true, request_id: requestId },
  });
  res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' });
  res.end(body);
}
