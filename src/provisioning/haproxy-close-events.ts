import { randomBytes, timingSafeEqual } from 'node:crypto';
import dgram from 'node:dgram';
import { PROXY_USER, type ListenerEndListener } from './listener-end.js';
import { HaproxySources } from './haproxy-sources.js';
import type { SourceEndListener, SourcePresenceListener } from './source-end.js';

// A closed connection's ticket is kept this long for an admission of it answered after the close: a listener HAProxy
// stopped waiting for while serve was busy (LISTENER_ADMISSION_TIMEOUT_MS, up to four times), and the same admission sent
// again by HAProxy's httpclient, which retries a request that timed out (up to 3 times; not configurable in 2.6).
const CLOSED_KEPT_MS = 240_000;
const MAX_CLOSED = 50_000;

/**
 * When a listener's connection through HAProxy closes, HAProxy's end-of-session log line (`<secret> <ticket>`,
 * haproxy-config.ts) comes to this loopback UDP socket: the listener's place is freed at once, as the front door
 * frees it, rather than when Icecast's auth thread gets to a listener_remove (which HAProxy mode does not ask for:
 * after a blip those callbacks filled Icecast's queue of 100 and the listeners coming back were answered "busy").
 * Sources' lines come here too (`<secret> + <id> <mount>` when Icecast took one, haproxy-sources.ts).
 * The secret is written only into the 0600 config, so no other local process can free a place. A datagram lost
 * leaves the place to the life-cycle worker, which frees places Icecast no longer lists.
 */
export class HaproxyCloseEvents {
  readonly secret = randomBytes(18).toString('base64url');
  private socket?: dgram.Socket;
  private readonly waiting = new Map<string, () => void>();
  /** Tickets whose connection closed, and when. */
  private readonly closed = new Map<string, number>();
  private readonly sources: HaproxySources;

  /**
   * `onSourceEnd` is told each source connection's exact body bytes from its line, `onListenerEnd` each listener's
   * bytes sent, `onSourcePresence` each source Icecast took and each one's end.
   */
  constructor(
    onSourceEnd?: SourceEndListener,
    private readonly onListenerEnd?: ListenerEndListener,
    onSourcePresence?: SourcePresenceListener,
  ) {
    this.sources = new HaproxySources(onSourcePresence, onSourceEnd);
  }

  get port(): number {
    return this.socket?.address().port ?? 0;
  }

  async start(): Promise<void> {
    const socket = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 * 1024 * 1024 });
    socket.on('message', (message) => this.onMessage(message.toString('latin1')));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => resolve());
    });
    this.socket = socket;
  }

  stop(): void {
    this.socket?.close();
    this.socket = undefined;
    this.waiting.clear();
    this.closed.clear();
    this.sources.clear();
  }

  /** Runs `left` when the connection with this ticket closes (at once if it already has). */
  whenClosed(ticket: string, left: () => void): void {
    if (this.closed.has(ticket)) return left();
    this.waiting.set(ticket, left);
  }

  /** HAProxy died: every connection it held is gone. */
  allClosed(): void {
    const lefts = [...this.waiting.values()];
    this.waiting.clear();
    for (const left of lefts) left();
    this.sources.allGone();
  }

  private onMessage(text: string): void {
    const fields = text.trim().split(' ');
    const [secret = '', ticket = '', sent = ''] = fields;
    const given = Buffer.from(secret);
    const wanted = Buffer.from(this.secret);
    if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) return;
    if (ticket === '+') return this.sources.started(fields[2] ?? '', fields[3] ?? '');
    if (ticket === '-') return this.sources.ended(fields.slice(3));
    if (!ticket) return;
    this.rememberClosed(ticket);
    const left = this.waiting.get(ticket);
    // A listener not admitted, or not yet (it got no audio): only remembered, for an admission answered late.
    if (!left) return;
    this.waiting.delete(ticket);
    const bytes = Number(sent);
    if (this.onListenerEnd && sent && Number.isSafeInteger(bytes) && bytes >= 0)
      this.onListenerEnd({ user: `${PROXY_USER}${ticket}`, bytes });
    left();
  }

  private rememberClosed(ticket: string): void {
    const now = Date.now();
    // Oldest first (a Map keeps the order of insertion): stop at the first one still kept.
    for (const [t, at] of this.closed) {
      if (now - at <= CLOSED_KEPT_MS && this.closed.size < MAX_CLOSED) break;
      this.closed.delete(t);
    }
    this.closed.set(ticket, now);
  }
}
