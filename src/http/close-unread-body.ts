import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Context } from 'koa';

/** How long a closing connection still reads (and drops) what the client sends, so that its answer is not lost. */
const LINGER_MS = 1000;

/**
 * An answer sent before the request's body was read (401, 429, 413, …) closes the connection: Node would otherwise
 * keep it and wait for the rest of the body for up to the request timeout. With Connection: close, Node ends the
 * socket once the answer is written.
 *
 * It would also destroy it at once; the client, still sending its body, then gets a reset that can discard the answer
 * it has not read yet ("fetch failed" instead of the 413). So the socket lingers, as web servers do: it sends its FIN
 * after the answer, drops what still arrives, and is destroyed when the client closes its side or after LINGER_MS.
 */
export function closeIfBodyUnread(ctx: Context): void {
  if (!hasUnreadBody(ctx.req)) return;
  ctx.set('Connection', 'close');
  const socket = ctx.req.socket as Socket | null; // none once a body reader that gave up has let it go
  if (socket) lingerOnClose(socket);
}

/** Whether part of the request's body has not been read (or not yet arrived). */
export function hasUnreadBody(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/** Node's server calls destroySoon() after an answer with Connection: close; this one closes gently instead. */
function lingerOnClose(socket: Socket): void {
  socket.destroySoon = () => {
    socket.end();
    socket.resume();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('end', () => socket.destroy());
    socket.once('close', () => clearTimeout(timer));
  };
}
