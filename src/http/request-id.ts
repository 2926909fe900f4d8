import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomId } from '../ids/index.js';

const acceptable = /^[A-Za-z0-9._:-]{1,128}$/;

/** Every response carries X-Request-Id: the caller's own when it is sensible, a new one otherwise. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const given = req.headers['x-request-id'];
  const id = typeof given === 'string' && acceptable.test(given) ? given : randomId('req_', 12);
  res.setHeader('X-Request-Id', id);
  return id;
}
