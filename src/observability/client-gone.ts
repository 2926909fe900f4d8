import type { ServerResponse } from 'node:http';

/**
 * The client closed the connection before its answer was finished (nginx logs this as 499). Not `req.socket`: a
 * request whose body the service stops reading (413) detaches it, yet the answer still goes out.
 */
export function clientGone(res: ServerResponse): boolean {
  return res.destroyed && !res.writableFinished;
}
