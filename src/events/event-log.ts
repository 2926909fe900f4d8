import { randomId } from '../ids/index.js';
import type { Client } from '../store/index.js';
import type { AgentEvent, EventType, StoredEvent } from './event-types.js';

/** Anything that runs one SQL statement: a transaction's client, or the pool (db.query). */
export type Sql = Pick<Client, 'query'> | { query(sql: string, params: unknown[]): Promise<unknown> };

export interface NewEvent {
  type: EventType;
  /** The service it is about; its owner's API key receives it. */
  serviceId?: string;
  orderId?: string;
  /** The owner, when there is no service yet (order.paid of an order that has none). */
  apiKeyId?: string;
  data?: Record<string, unknown>;
  /** Emitted at most once per key (e.g. service.expiring for one expiry time). */
  onceKey?: string;
}

/**
 * Records an event; call it with the transaction that makes the change it reports, so both commit or neither. The
 * database fans it out to webhook endpoints and wakes SSE readers (trigger events_fan_out, migration 016).
 */
export async function recordEvent(sql: Sql, event: NewEvent): Promise<void> {
  const insert = eventInsert(event, 1);
  await (sql as Pick<Client, 'query'>).query(insert.sql, insert.params);
}

/**
 * recordEvent's INSERT with its parameters numbered from `first`, to run as a data-modifying CTE of the statement that
 * makes the change it reports (one round trip for both); with `onlyIf`, the name of a CTE of that statement, it is
 * recorded only when that CTE returns a row.
 */
export function eventInsert(event: NewEvent, first: number, onlyIf?: string): { sql: string; params: unknown[] } {
  const [id, type, key, service, order, data, once] = Array.from({ length: 7 }, (_, i) => `$${first + i}`);
  return {
    sql: `INSERT INTO events (id, type, api_key_id, service_id, order_id, data, once_key)
     SELECT ${id}, ${type}, owner, ${service},
            coalesce(${order}, (SELECT order_id FROM services WHERE id = ${service})), ${data}, ${once}
     FROM (SELECT coalesce(${key}, (SELECT api_key_id FROM services WHERE id = ${service}),
                           (SELECT api_key_id FROM orders WHERE id = ${order})) AS owner) o
     WHERE owner IS NOT NULL -- an event nobody owns is not recorded, and never fails the change it reports
     ${onlyIf ? `AND EXISTS (SELECT 1 FROM ${onlyIf})` : ''}
     ON CONFLICT (once_key) DO NOTHING`,
    params: eventParams(event),
  };
}

function eventParams(event: NewEvent): unknown[] {
  return [
    randomId('evt_'),
    event.type,
    event.apiKeyId ?? null,
    event.serviceId ?? null,
    event.orderId ?? null,
    event.data ?? {},
    event.onceKey ?? null,
  ];
}

/**
 * eventInsert for several events of one change, in one INSERT: they are numbered (seq) in the order given. (Two
 * data-modifying CTEs of one statement run in no defined order.)
 */
export function eventsInsert(events: NewEvent[], first: number, onlyIf?: string): { sql: string; params: unknown[] } {
  const rows = events.map((_, e) => {
    const [id, type, key, service, order, data, once] = Array.from({ length: 7 }, (_, i) => `$${first + 7 * e + i}`);
    return `SELECT ${e} AS n, ${id}::text AS id, ${type}::text AS type, ${key}::text AS api_key_id,
            ${service}::text AS service_id, ${order}::text AS order_id, ${data}::jsonb AS data,
            ${once}::text AS once_key`;
  });
  return {
    sql: `INSERT INTO events (id, type, api_key_id, service_id, order_id, data, once_key)
     SELECT e.id, e.type, owner, e.service_id,
            coalesce(e.order_id, (SELECT order_id FROM services WHERE id = e.service_id)), e.data, e.once_key
     FROM (${rows.join(' UNION ALL ')}) e,
          LATERAL (SELECT coalesce(e.api_key_id, (SELECT api_key_id FROM services WHERE id = e.service_id),
                           (SELECT api_key_id FROM orders WHERE id = e.order_id)) AS owner) o
     WHERE owner IS NOT NULL -- an event nobody owns is not recorded, and never fails the change it reports
     ${onlyIf ? `AND EXISTS (SELECT 1 FROM ${onlyIf})` : ''}
     ORDER BY e.n
     ON CONFLICT (once_key) DO NOTHING`,
    params: events.flatMap(eventParams),
  };
}

/** The same, for the service on an Icecast mount (source callbacks name the mount, not the service). */
export async function recordMountEvent(
  sql: Sql,
  mount: string,
  type: EventType,
  data: Record<string, unknown> = {},
): Promise<void> {
  await (sql as Pick<Client, 'query'>).query(
    `INSERT INTO events (id, type, api_key_id, service_id, order_id, data)
     SELECT $1, $2, api_key_id, id, order_id, $4 FROM services WHERE mount = $3`,
    [randomId('evt_'), type, mount, data],
  );
}

/** Columns of a stored event: what agents see and its position (tx, seq). */
export const EVENT_COLUMNS =
  `tx::text AS tx, seq::text AS seq, id, type, to_char(created_at AT TIME ZONE 'UTC', ` +
  `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at, service_id, order_id, data`;

/**
 * Readers go through events in (tx, seq) order and show only those whose transaction is older than every transaction
 * still running. Every event that becomes visible later then comes after the last one shown: none is skipped, which
 * reading by seq alone cannot promise (a sequence number is taken before commit, and commits come in any order).
 */
export const SETTLED_EVENTS = 'tx < pg_snapshot_xmin(pg_current_snapshot())';
export const EVENT_ORDER = 'ORDER BY events.tx, events.seq'; // the columns, not the text aliases of EVENT_COLUMNS

export function publicEvent(row: StoredEvent): AgentEvent {
  return {
    id: row.id,
    type: row.type,
    created_at: row.created_at,
    service_id: row.service_id,
    order_id: row.order_id,
    data: row.data,
  };
}
