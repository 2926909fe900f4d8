import type { IncomingMessage, Server } from 'node:http';
import { randomId } from '../ids/index.js';
import { API_PREFIX } from './app.js';

/** PUT /services/{id}/files/{name}: the one request whose body may take long; it has an idle timeout instead. */
export function isUploadRequest(req: IncomingMessage): boolean {
  const path = (req.url ?? '').split('?')[0];
  return (
    req.method === 'PUT' &&
    path.startsWith(`${API_PREFIX}/services/`) &&
    /^\/services\/[^/]+\/files\/[^/]+$/.test(path.slice(API_PREFIX.length))
  );
}

/** A request without Content-Length (or with 0) and without Transfer-Encoding is whole once its headers are. */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/**
 * Node's server.requestTimeout, except for uploads: every other request must have arrived whole within `ms` of its
 * headers, or it gets a 408 error document and its connection is closed. (server.requestTimeout cannot spare one
 * kind of request, so it is turned off and this takes its place; headersTimeout still bounds the headers.)
 */
export function limitRequestTime(
  server: Server,
  ms: number,
  exempt: (req: IncomingMessage) => boolean = isUploadRequest,
): void {
  server.requestTimeout = 0;
  if (ms <= 0) return;
  server.on('request', (req, res) => {
    if (req.complete || !hasBody(req) || exempt(req)) return;
    const timer = setTimeout(() => {
      if (req.complete) return;
      if (res.headersSent) {
        req.socket.destroy();
        return;
      }
      const requestId = randomId('req_', 12);
      const body = JSON.stringify({
        ok: false,
        error: {
          code: 'request_timeout',
          message: 'The request took too long to arrive. Send it again, complete and at once.',
          retryable: true,
          request_id: requestId,
        },
      });
      res.writeHead(408, {
        'Content-Type': 'application/json; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'X-Request-Id': requestId,
        Connection: 'close',
      });
      res.end(body, () => req.socket.destroy());
    }, ms);
    timer.unref();
    res.once('close', () => clearTimeout(timer));
    req.once('end', () => clearTimeout(timer));
  });
}
