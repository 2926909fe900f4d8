import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { randomId } from '../ids/index.js';

const answers: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [
    431,
    'headers_too_large',
    'The request headers are too large (16 KiB at most). Send only the headers the operation needs.',
  ],
  ERR_HTTP_REQUEST_TIMEOUT: [
    408,
    'request_timeout',
    'The request took too long to arrive. Send it again, complete and at once.',
  ],
};

/**
 * Requests that Node rejects before Koa sees them (oversized headers, malformed HTTP, slow clients) still get an
 * error document instead of a bare status line or a dropped connection.
 */
export function answerClientErrors(server: Server): void {
  server.on('connect', (_req, socket: Socket) => {
    const requestId = randomId('req_', 12);
    const body = JSON.stringify({
      ok: false,
      error: {
        code: 'method_not_allowed',
        message: 'CONNECT is not supported: this is an HTTP API, not a proxy.',
        retryable: false,
        request_id: requestId,
      },
    });
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ` +
        `${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable || err.code === 'ECONNRESET') {
      socket.destroy();
      return;
    }
    const [status, code, message] = answers[err.code ?? ''] ?? [
      400,
      'bad_request',
      'The request is not well-formed HTTP. Send a valid HTTP/1.1 request with a JSON body.',
    ];
    const requestId = randomId('req_', 12);
    const body = JSON.stringify({
      ok: false,
      error: { code, message, retryable: status === 408, request_id: requestId },
    });
    socket.end(
      `HTTP/1.1 ${status} ${code}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ` +
        `${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
