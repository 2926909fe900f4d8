import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';

/**
 * An answer sent before the request's body was read (401, 429, 415, …) closes the connection: Node would otherwise
 * keep it and wait for the rest of the body for up to the request timeout. With Connection: close, Node ends and
 * destroys the socket as soon as the answer is written.
 */
export function closeIfBodyUnread(ctx: Context): void {
  if (hasUnreadBody(ctx.req)) ctx.set('Connection', 'close');
}

/** Whether part of the request's body has not been read (or not yet arrived). */
export function hasUnreadBody(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}
