import { randomBytes, timingSafeEqual } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { sourceMountOf, type SourceEndListener } from './source-end.js';

/**
 * Icecast 2.4.4 listens with a backlog of 5 (ICECAST_LISTEN_QUEUE, not configurable): a burst of listeners beyond it
 * loses its SYNs and waits for their retries (1 s, 3 s, 7 s, …). And it refuses a listener outright ("busy, please
 * try again later") once more than 100 wait for its one URL-auth thread. The front door listens on the public port
 * with a deep backlog, reads each request's head, and lets connections into Icecast one every `connectIntervalMs`
 * and at most `inFlight` at a time until Icecast has either called back about them or answered: Icecast's queues
 * never overflow, its auth thread always has the next listener waiting, and every listener is answered in turn.
 * A listener's request carries, instead of any Authorization it sent, a ticket the callback redeems (claim) for the
 * listener's real address: Icecast sees only the front door's.
 */
export interface FrontDoorOptions {
  host: string;
  /** 0: any free port. */
  port: number;
  /** Icecast's own address now (it may change when Icecast restarts); undefined while it does not run. */
  upstream: () => { host: string; port: number } | undefined;
  /** Connections in Icecast at once until it calls back or answers (< 100: it refuses more waiting for auth). */
  inFlight?: number;
  /** Least time between two connections into Icecast: its accept queue (6) must not overflow in a burst. */
  connectIntervalMs?: number;
  /** Listen backlog of the public socket (the kernel caps it at net.core.somaxconn). */
  backlog?: number;
  headerTimeoutMs?: number;
  /** Told the exact bytes of each source connection Icecast accepted, when it closes (the meter's final figure). */
  onSourceEnd?: SourceEndListener;
}

/**
 * Who the front door says a listener is, once its listener_add callback redeems the ticket; `whenGone` names what to
 * do the moment the listener's connection closes (the front door knows before Icecast's listener_remove comes).
 */
export type ForwardedClaim = { ip: string; whenGone(left: () => void): void } | 'impostor' | undefined;

export const FRONT_DOOR_USER = 'frontdoor-';
// How long a listener may take to read what Icecast sent before it closed the connection.
const LINGER_MS = 5_000;
const MAX_HEAD_BYTES = 16 * 1024;
const SLOT_TIMEOUT_MS = 10_000;
const BUSY_RETRY_MS = 100;

/** Icecast's 403 "busy, please try again later" (auth.c, more than 100 waiting for authentication). */
function isBusyRefusal(first: Buffer): boolean {
  const text = first.toString('latin1', 0, 512);
  return text.startsWith('HTTP/1.0 403') && text.includes('busy, please try again later');
}

interface Ticket {
  ip: string;
  release(): void;
  left?: () => void;
}

export class IcecastFrontDoor {
  private server?: net.Server;
  private readonly secret = randomBytes(18).toString('base64url');
  private readonly tickets = new Map<string, Ticket>();
  private readonly waiting: Array<() => void> = [];
  private busy = 0;
  private nextTicket = 0;
  private lastConnectAt = 0;
  private pacing?: NodeJS.Timeout;
  private readonly sockets = new Set<net.Socket>();

  constructor(private readonly options: FrontDoorOptions) {}

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async start(): Promise<void> {
    const server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.options.host, port: this.options.port, backlog: this.options.backlog ?? 4096 }, () =>
        resolve(),
      );
    });
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    clearTimeout(this.pacing);
    for (const socket of this.sockets) socket.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The callback's credentials: a ticket of ours gives the listener's address (once); a forged one is refused. */
  claim(user: string, pass: string): ForwardedClaim {
    if (!user.startsWith(FRONT_DOOR_USER)) return undefined;
    const given = Buffer.from(pass);
    const wanted = Buffer.from(this.secret);
    if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) return 'impostor';
    const ticketId = user.slice(FRONT_DOOR_USER.length);
    const ticket = this.tickets.get(ticketId);
    if (!ticket) return 'impostor';
    this.tickets.delete(ticketId);
    ticket.release();
    return {
      ip: ticket.ip,
      whenGone: (left) => {
        ticket.left = left;
      },
    };
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    socket.setNoDelay(true);
    const timer = setTimeout(() => socket.destroy(), this.options.headerTimeoutMs ?? 15_000);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) {
        if (head.length > MAX_HEAD_BYTES) socket.destroy();
        return;
      }
      clearTimeout(timer);
      socket.off('data', onData);
      socket.pause();
      this.enter(socket, head.subarray(0, end), head.subarray(end + 4));
    };
    socket.on('data', onData);
    socket.once('close', () => clearTimeout(timer));
  }

  /** Waits for a slot and its turn (at the head of the line when it comes back), then hands it to Icecast. */
  private enter(socket: net.Socket, head: Buffer, rest: Buffer, first = false): void {
    const go = () => {
      if (socket.destroyed) return this.releaseSlot();
      this.forward(socket, head, rest);
    };
    if (first) this.waiting.unshift(go);
    else this.waiting.push(go);
    this.admitNext();
  }

  private admitNext(): void {
    if (this.pacing) return;
    while (this.waiting.length && this.busy < (this.options.inFlight ?? 32)) {
      const wait = this.lastConnectAt + (this.options.connectIntervalMs ?? 1) - performance.now();
      if (wait > 0) {
        this.pacing = setTimeout(() => {
          this.pacing = undefined;
          this.admitNext();
        }, wait);
        return;
      }
      this.lastConnectAt = performance.now();
      this.busy++;
      this.waiting.shift()!();
    }
  }

  private releaseSlot(): void {
    this.busy--;
    this.admitNext();
  }

  private forward(socket: net.Socket, head: Buffer, rest: Buffer): void {
    const target = this.options.upstream();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(slotTimer);
      this.releaseSlot();
    };
    // Icecast may hold a connection without calling back (a stalled source thread): the slot is not held forever.
    const slotTimer = setTimeout(release, SLOT_TIMEOUT_MS);
    if (!target) {
      release();
      return void socket.end('HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n');
    }
    if (!passesToIcecast(head.toString('latin1', 0, head.indexOf('\r\n')))) {
      release();
      return void socket.end('HTTP/1.0 401 Authentication Required\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n');
    }
    const ticketId = String(++this.nextTicket);
    const ticket: Ticket = { ip: (socket.remoteAddress ?? '').replace(/^::ffff:/, ''), release };
    const rewritten = this.rewrite(head, ticketId, ticket);
    // A listener (GET) may still be reading when Icecast closes; a source only sends, it learns of a cut at once.
    const receives = head.toString('latin1', 0, 4) === 'GET ';
    const upstream = net.connect(target.port, target.host);
    upstream.setNoDelay(true);
    upstream.once('connect', () => upstream.write(Buffer.concat([rewritten, rest])));
    const counted = this.countSource(socket, head, rest);
    let again = false;
    upstream.once('data', (first: Buffer) => {
      release();
      // Icecast's auth queue was over 100 (its listener_remove callbacks count too, e.g. after a mass disconnect):
      // this listener is not refused, it waits for its turn again.
      again = isBusyRefusal(first);
      if (again) return void upstream.destroy();
      counted?.accepted(first);
      socket.write(first);
      socket.pipe(upstream);
      upstream.pipe(socket);
      socket.resume();
    });
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      release();
      this.tickets.delete(ticketId);
      counted?.ended();
      // A source that hung up may have sent its last second or more into the pipe: Icecast still gets (and counts) it.
      if (receives || again) upstream.destroy();
      else drain(upstream);
      if (!again) return finish(socket, () => ticket.left?.(), receives ? LINGER_MS : 0);
      socket.off('close', end);
      setTimeout(() => this.enter(socket, head, rest, true), BUSY_RETRY_MS);
    };
    upstream.once('close', end);
    upstream.on('error', end);
    socket.once('close', end);
  }

  /**
   * Counts a source's body as it passes (what came with its head, then every chunk read after Icecast answered) and
   * reports it at the close when Icecast accepted the source; undefined for other requests.
   */
  private countSource(socket: net.Socket, head: Buffer, rest: Buffer) {
    const report = this.options.onSourceEnd;
    const mount = report && sourceMountOf(head.toString('latin1', 0, 1024));
    if (!report || !mount) return undefined;
    const openedAt = Date.now();
    let bytes = rest.length;
    let live = false;
    const count = (chunk: Buffer) => {
      bytes += chunk.length;
    };
    return {
      // Icecast answers an accepted source 200, or 100 to a PUT that expects it.
      accepted(first: Buffer) {
        live = /^HTTP\/1\.[01] [12]\d\d/.test(first.toString('latin1', 0, 16));
        if (live) socket.on('data', count);
      },
      ended() {
        socket.off('data', count);
        if (live) report({ mount, bytes, openedAt, closedAt: Date.now() });
        live = false;
      },
    };
  }

  /** A listener's GET carries a ticket instead of its Authorization; other requests (sources, admin) go unchanged. */
  private rewrite(head: Buffer, ticketId: string, ticket: Ticket): Buffer {
    const text = head.toString('latin1');
    const lines = text.split('\r\n');
    const [method = '', target = ''] = lines[0].split(' ');
    if (method.toUpperCase() !== 'GET' || target.startsWith('/admin')) return Buffer.from(`${text}\r\n\r\n`, 'latin1');
    this.tickets.set(ticketId, ticket);
    // A user name of its own per listener: Icecast refuses a second listener of a mount with the same one.
    const credentials = Buffer.from(`${FRONT_DOOR_USER}${ticketId}:${this.secret}`).toString('base64');
    const kept = lines.filter((line, i) => i === 0 || !/^authorization\s*:/i.test(line));
    return Buffer.from(`${[...kept, `Authorization: Basic ${credentials}`].join('\r\n')}\r\n\r\n`, 'latin1');
  }
}

/** Ends Icecast's side of a source once what the source sent before hanging up is written, or after LINGER_MS. */
function drain(upstream: net.Socket): void {
  if (upstream.destroyed) return;
  upstream.end();
  setTimeout(() => upstream.destroy(), LINGER_MS).unref();
}

/**
 * Ends a client's connection once Icecast closed its side: what Icecast sent before still reaches a listener (usage
 * counts it as sent), unless it does not take it within `lingerMs`. `left` runs once it is closed.
 */
function finish(socket: net.Socket, left: () => void, lingerMs: number): void {
  if (socket.destroyed) return left();
  socket.once('close', left);
  if (lingerMs === 0) return void socket.destroy();
  socket.end();
  setTimeout(() => socket.destroy(), lingerMs).unref();
}

/**
 * What the public port passes on to Icecast: listeners, sources, and an encoder's title update. Icecast asks serve
 * about any other command on a mount's admin page (killsource, listclients, moveclients…) the way it asks about a
 * title update, so with the buyer's source credentials those would pass too: they stop here. Icecast reads a
 * method in any case.
 */
export function passesToIcecast(requestLine: string): boolean {
  const [method = '', target = ''] = requestLine.split(' ');
  const verb = method.toUpperCase();
  if (verb !== 'GET' && verb !== 'PUT' && verb !== 'SOURCE') return false;
  if (!target.startsWith('/admin')) return true;
  const keys = [...new URLSearchParams(target.slice(target.indexOf('?') + 1))].map(([key, value]) => [
    key.toLowerCase(),
    value,
  ]);
  const only = (key: string) => keys.filter(([k]) => k === key).map(([, value]) => value);
  return (
    verb === 'GET' &&
    target.startsWith('/admin/metadata?') &&
    only('mount').length === 1 &&
    only('mode').join() === 'updinfo'
  );
}
