import { randomId } from '../ids/index.js';
import type { Sql } from './event-log.js';
import { recordEvent } from './event-log.js';
import type { EventType } from './event-types.js';

/** What a service.expiring event tells about extending the service (the operation and its price), if anything. */
export type ExtendHint = (service: {
  id: string;
  product_id: string;
  limits: Record<string, unknown>;
  status: string;
  expires_at: Date | null;
}) => Promise<Record<string, unknown> | undefined>;

/**
 * service.expiring for this host's active (or suspended) services that expire within `leadSeconds`: once per service
 * and expiry time
 * (an upgrade or renewal that moves expires_at arms it again). With `extendHint`, the event also says how to extend.
 */
export async function recordExpiringServices(
  sql: Sql,
  hostId: string,
  leadSeconds: number,
  extendHint?: ExtendHint,
): Promise<void> {
  // A Database answers rows, a transaction's Client a result with rows.
  const query = async (text: string, params: unknown[]) => {
    const result = await (sql as { query(text: string, params: unknown[]): Promise<unknown> }).query(text, params);
    return {
      rows: (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as Array<Record<string, unknown>>,
    };
  };
  const due = `FROM services s
     WHERE s.host_id = $1 AND s.status IN ('active', 'suspended') AND s.expires_at > now() AND s.expires_at <= now() + make_interval(secs => $2)
       AND NOT EXISTS (SELECT 1 FROM events e WHERE e.once_key = 'service.expiring ' || s.id || ' ' || s.expires_at::text)`;
  const dueKey = `s.id || ' ' || s.expires_at::text`;
  const ids: string[] = [];
  const dueKeys: string[] = [];
  const hints: string[] = [];
  if (extendHint) {
    const { rows } = await query(
      `SELECT s.id, s.product_id, s.limits, s.status, s.expires_at, ${dueKey} AS due_key ${due}`,
      [hostId, leadSeconds],
    );
    for (const row of rows as Array<Parameters<ExtendHint>[0] & { due_key: string }>) {
      ids.push(row.id);
      dueKeys.push(row.due_key);
      hints.push(JSON.stringify((await extendHint(row).catch(() => undefined)) ?? {}));
    }
  }
  // With hints, only the services and expiries they were computed for: a service that became due (or was extended)
  // meanwhile waits for the next pass rather than going out without its hint.
  const hinted = extendHint ? `AND ${dueKey} = ANY($6::text[])` : '';
  await query(
    `INSERT INTO events (id, type, api_key_id, service_id, order_id, data, once_key)
     SELECT $3 || md5(s.id || s.expires_at::text), 'service.expiring', s.api_key_id, s.id, s.order_id,
            jsonb_build_object('expires_at', to_char(s.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                               'seconds_left', floor(extract(epoch FROM s.expires_at - now()))::int, 'lead_seconds', $2::int)
              || coalesce((SELECT h.hint::jsonb FROM unnest($4::text[], $5::text[]) AS h(id, hint) WHERE h.id = s.id), '{}'),
            'service.expiring ' || s.id || ' ' || s.expires_at::text
     ${due} ${hinted}
     ON CONFLICT DO NOTHING`,
    [hostId, leadSeconds, randomId('evt_', 6), ids, hints, ...(extendHint ? [dueKeys] : [])],
  );
}

/** Fractions of the bought listener places whose crossing (upwards) is reported. */
const THRESHOLDS = [0.8, 1];

/** listeners.threshold when the measured listeners cross 80 % or 100 % of the bought places upwards. */
export async function recordListenerThreshold(
  sql: Sql,
  service: { id: string; usage: Record<string, unknown> | null },
  cap: number,
  listeners: number,
): Promise<void> {
  if (!(cap > 0)) return;
  const before = Number(service.usage?.listeners ?? 0);
  const crossed = THRESHOLDS.filter((t) => before < t * cap && listeners >= t * cap).pop();
  if (crossed === undefined) return;
  await recordEvent(sql, {
    type: 'listeners.threshold',
    serviceId: service.id,
    data: { listeners, max_listeners: cap, threshold_percent: crossed * 100 },
  });
}

const STATUS_EVENTS: Record<string, EventType> = {
  active: 'service.active',
  suspended: 'service.suspended',
  expired: 'service.expired',
};

/** service.active / .suspended / .expired for a status change, in the transaction that makes it. */
export async function recordStatusChange(
  sql: Sql,
  serviceId: string,
  from: string,
  to: string | undefined,
  reason: string,
): Promise<void> {
  const type = to && STATUS_EVENTS[to];
  if (type) await recordEvent(sql, { type, serviceId, data: { status: to, previous_status: from, reason } });
}
