import type { Logger } from '../log/index.js';
import type { Client, Database } from '../store/index.js';
import { EVENT_COLUMNS, EVENT_ORDER, SETTLED_EVENTS } from './event-log.js';
import type { StoredEvent } from './event-types.js';

const CHANNEL = 'agent_audio_events';
/** Notified when a webhook delivery is queued (migration 052). */
const DELIVERIES_CHANNEL = 'agent_audio_deliveries';
/** A service's events ($1: its id): its own, and its order's order.paid, recorded before the service existed. */
const OF_SERVICE = '(service_id = $1 OR order_id = (SELECT order_id FROM services WHERE id = $1))';

/** A reader's wait for its next look: woken, cancelled, or after a delay. */
interface Wake {
  promise: Promise<void>;
  cancel(): void;
  lookAgainIn(ms: number): void;
}

/** Where a reader is in the event order; an event id (Last-Event-ID) becomes one with `position`. */
export interface FeedPosition {
  tx: string;
  seq: string;
}

/**
 * The event table as live feeds: `subscribe(serviceId, afterEventId)` yields a service's events in order, first those
 * after the given event, then each new one as it commits, on whichever instance it happened. One LISTEN connection
 * per instance; a notification names its service (trigger events_fan_out) and wakes only that service's readers, so
 * idle readers make no queries however busy other services are. While the LISTEN connection is down (it is
 * reconnected) readers look every `pollMs` instead, and all of them look once when it is back.
 * For SSE (GET /services/{id}/events) and any other channel that forwards events (MCP notifications).
 */
export class EventFeed {
  /** Readers waiting for their service's next event, by service id. */
  private readonly waiting = new Map<string, Set<() => void>>();
  private listener?: Client;
  /** A LISTEN connection was up before: the next one follows a break. */
  private everListened = false;
  private closed = false;
  private readonly onQueued: Array<() => void> = [];

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    private readonly pollMs = 2000,
  ) {}

  /** Starts listening; events that queued webhook deliveries also reach `onDeliveries` callbacks (the worker's). */
  async start(): Promise<void> {
    await this.listen().catch((err) => this.log.warn({ err }, 'events: LISTEN failed; readers fall back to polling'));
  }

  onDeliveries(callback: () => void): void {
    this.onQueued.push(callback);
  }

  private async listen(): Promise<void> {
    if (this.closed) return;
    const connection = await this.db.dedicated();
    connection.on('notification', (message) => {
      if (message.channel === DELIVERIES_CHANNEL) for (const callback of this.onQueued) callback();
      else this.wake(message.payload ?? '');
    });
    connection.on('error', () => {
      // close() may have released it already: PostgreSQL ends the connection after UNLISTEN when it shuts down too.
      if (this.listener !== connection) return;
      this.listener = undefined;
      connection.release(true);
      this.wakeAll(); // they poll until the connection is back
      if (!this.closed)
        setTimeout(() => {
          this.listen().catch(() => {
            /* polling goes on; retried on the next failure */
          });
        }, this.pollMs).unref();
    });
    try {
      await connection.query(`LISTEN ${CHANNEL}; LISTEN ${DELIVERIES_CHANNEL}`);
    } catch (error) {
      connection.release(true);
      throw error;
    }
    if (this.closed) {
      connection.release(true);
      return;
    }
    const reconnected = this.everListened;
    this.everListened = true;
    this.listener = connection;
    if (reconnected) this.wakeAll(); // what was notified while it was down
  }

  private wake(serviceId: string): void {
    for (const wake of [...(this.waiting.get(serviceId) ?? [])]) wake();
  }

  private wakeAll(): void {
    for (const readers of [...this.waiting.values()]) for (const wake of [...readers]) wake();
  }

  /** The position of an event of this service, or undefined when it has no such event. */
  async position(serviceId: string, eventId: string): Promise<FeedPosition | undefined> {
    const [row] = await this.db.query<FeedPosition & Record<string, unknown>>(
      `SELECT tx::text AS tx, seq::text AS seq FROM events WHERE id = $2 AND ${OF_SERVICE}`,
      [serviceId, eventId],
    );
    return row;
  }

  /** The service's events after `after` (from its first when undefined), at most `limit`, only settled ones. */
  async read(serviceId: string, after: FeedPosition | undefined, limit = 100): Promise<StoredEvent[]> {
    return this.db.query<StoredEvent & Record<string, unknown>>(
      `SELECT ${EVENT_COLUMNS} FROM events WHERE ${OF_SERVICE} AND ${SETTLED_EVENTS}
         AND ($2::xid8 IS NULL OR (tx, seq) > ($2::xid8, $3::bigint)) ${EVENT_ORDER} LIMIT $4`,
      [serviceId, after?.tx ?? null, after?.seq ?? null, limit],
    );
  }

  /** Whether the service has events after `after` that read() does not show yet (not settled). */
  private async unsettled(serviceId: string, after: FeedPosition | undefined): Promise<boolean> {
    const [row] = await this.db.query<{ found: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM events WHERE ${OF_SERVICE} AND NOT (${SETTLED_EVENTS})
         AND ($2::xid8 IS NULL OR (tx, seq) > ($2::xid8, $3::bigint))) AS found`,
      [serviceId, after?.tx ?? null, after?.seq ?? null],
    );
    return row?.found === true;
  }

  /** Yields the service's events after `after`, live, until the consumer stops or the feed closes (shutdown). */
  async *subscribe(serviceId: string, after?: FeedPosition, signal?: AbortSignal): AsyncGenerator<StoredEvent> {
    let position = after;
    while (!this.closed && !signal?.aborted) {
      // Armed before reading, so a notification that arrives during the read is not missed.
      const woken = this.nextWake(serviceId, signal);
      const events = await this.read(serviceId, position);
      for (const event of events) {
        position = { tx: event.tx, seq: event.seq };
        yield event;
      }
      if (events.length === 100) {
        woken.cancel();
        continue;
      }
      // An event committed behind a transaction still running is shown once that one ends, which nothing notifies.
      if (await this.unsettled(serviceId, position)) woken.lookAgainIn(this.pollMs);
      await woken.promise;
    }
  }

  private nextWake(serviceId: string, signal?: AbortSignal): Wake {
    let done!: () => void;
    const promise = new Promise<void>((resolve) => {
      done = resolve;
    });
    // Without a LISTEN connection a notification may be missed: look again after pollMs.
    let timer = this.listener ? undefined : setTimeout(() => finish(), this.pollMs);
    const readers = this.waiting.get(serviceId) ?? new Set<() => void>();
    this.waiting.set(serviceId, readers);
    let finished = false;
    const finish = () => {
      finished = true;
      clearTimeout(timer);
      readers.delete(finish);
      if (!readers.size && this.waiting.get(serviceId) === readers) this.waiting.delete(serviceId);
      signal?.removeEventListener('abort', finish);
      done();
    };
    readers.add(finish);
    signal?.addEventListener('abort', finish);
    const lookAgainIn = (ms: number) => {
      if (finished) return;
      clearTimeout(timer);
      timer = setTimeout(() => finish(), ms);
    };
    return { promise, cancel: finish, lookAgainIn };
  }

  /** Ends every subscription (they return) and the LISTEN connection. */
  async close(): Promise<void> {
    this.closed = true;
    this.wakeAll();
    const listener = this.listener;
    this.listener = undefined;
    if (listener) {
      await listener.query(`UNLISTEN ${CHANNEL}; UNLISTEN ${DELIVERIES_CHANNEL}`).catch(() => {});
      listener.release();
    }
  }
}
