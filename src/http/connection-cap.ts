import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { limitKey, plainAddress } from '../transport/index.js';

const overCap = Symbol('over the connection cap');
/** How long a connection over the cap may take to send the request that gets the 429, before it is dropped. */
const GRACE_MS = 2000;

/**
 * At most `max` open connections per client address, an IPv6 client by its /64 (0: no cap). A connection over the cap
 * gets one answer, 429 too_many_connections with Connection: close, to whatever it asks first, and is closed; one that
 * asks nothing is dropped after 2 s. Connections from `exempt` addresses (Icecast's callbacks, a local reverse proxy)
 * are not counted.
 */
export class ConnectionCap {
  private readonly open = new Map<string, number>();

  constructor(
    readonly max: number,
    private readonly exempt: ReadonlySet<string> = new Set(),
  ) {}

  /** Counts the server's connections; call before it accepts any. */
  watch(server: Server): void {
    if (this.max <= 0) return;
    server.prependListener('connection', (socket: Socket) => {
      const plain = plainAddress(socket.remoteAddress);
      if (!plain || this.exempt.has(plain)) return;
      const address = limitKey(plain);
      const count = (this.open.get(address) ?? 0) + 1;
      this.open.set(address, count);
      socket.once('close', () => {
        const left = (this.open.get(address) ?? 1) - 1;
        if (left > 0) this.open.set(address, left);
        else this.open.delete(address);
      });
      if (count > this.max) {
        (socket as Socket & { [overCap]?: boolean })[overCap] = true;
        setTimeout(() => socket.destroy(), GRACE_MS).unref();
      }
    });
  }

  /** Whether this connection is one over the cap. */
  isOver(socket: Socket): boolean {
    return (socket as Socket & { [overCap]?: boolean })[overCap] === true;
  }

  /** Refuses a request on a connection over the cap (throws the 429 to answer it with). */
  check(ctx: Context): void {
    if (!this.isOver(ctx.req.socket)) return;
    throw new ApiError(
      429,
      'too_many_connections',
      `This address already has ${this.max} connections open to this service, the most allowed. Reuse an ` +
        `open connection (keep-alive) or close some, then retry.`,
      { retryable: true, headers: { 'Retry-After': '1', Connection: 'close' } },
    );
  }
}
