import type { Client } from '../store/index.js';
import { serviceEventSql, type Queryable } from './service-events.js';

export type ServiceStatus = 'pending' | 'provisioning' | 'active' | 'failed' | 'suspended' | 'expired';

/** A new service, inserted with its paid order (ServiceRecords.newServiceInsert). */
export const NEW_SERVICE_STATUS = 'active' satisfies ServiceStatus;

/** What moves a service from one status to another. */
export type TransitionKind = 'lifecycle' | 'stop' | 'upgrade' | 'extension';

const LIFECYCLE_TARGETS: readonly ServiceStatus[] = ['active', 'suspended', 'expired', 'failed'];

/**
 * Every status change a service may make, per kind: from → the statuses it may go to. A new service starts
 * NEW_SERVICE_STATUS; nothing else changes a service's status.
 * - lifecycle: the life-cycle rules (rules/lifecycle.json) run over live services only, and may send them to any
 *   status their schema names.
 * - stop: its owner stops a live service; it ends expired for good (stopped_at).
 * - upgrade: a paid upgrade resumes a suspended service; one that expired while its upgrade was being paid is
 *   active again until the life-cycle worker's next pass sees its paid time over.
 * - extension: more paid time; an expired service comes back, a suspended one stays suspended.
 */
export const SERVICE_TRANSITIONS: Readonly<
  Record<TransitionKind, Partial<Record<ServiceStatus, readonly ServiceStatus[]>>>
> = {
  lifecycle: { active: LIFECYCLE_TARGETS, suspended: LIFECYCLE_TARGETS },
  stop: { active: ['expired'], suspended: ['expired'] },
  upgrade: { active: ['active'], suspended: ['active'], expired: ['active'] },
  extension: { active: ['active'], suspended: ['suspended'], expired: ['active'] },
};

/** How each kind of change is recorded in service_events. */
const EVENTS: Record<TransitionKind, { kind: string; code: string | null }> = {
  lifecycle: { kind: 'transition', code: null },
  stop: { kind: 'transition', code: 'stopped' },
  upgrade: { kind: 'upgrade', code: null },
  extension: { kind: 'extend', code: null },
};

/** A status change no table row allows: a bug in the caller, refused before anything is written. */
export class IllegalServiceTransition extends Error {
  constructor(kind: TransitionKind, from: string, to: string | undefined) {
    super(`a service does not go from ${from} to ${to ?? 'anything'} by ${kind}`);
  }
}

export function allowedTransition(kind: TransitionKind, from: ServiceStatus, to: ServiceStatus): boolean {
  return SERVICE_TRANSITIONS[kind][from]?.includes(to) ?? false;
}

/** Where a kind of change that has a single destination takes a service in `from`. */
export function nextStatus(kind: TransitionKind, from: ServiceStatus): ServiceStatus {
  const targets = SERVICE_TRANSITIONS[kind][from];
  if (targets?.length !== 1) throw new IllegalServiceTransition(kind, from, undefined);
  return targets[0];
}

export interface ServiceTransition {
  serviceId: string;
  kind: TransitionKind;
  /** The status the caller read (under the row's lock, or as the row must still be): checked again in SQL. */
  from: ServiceStatus;
  /** Defaults to the kind's only destination from `from`. */
  to?: ServiceStatus;
  /** The service's status_reason, and its event's. */
  reason: string;
  /** Other columns the same change writes, by value. */
  set?: Record<string, unknown>;
  /** Other columns the same change writes, as SQL expressions over the row. */
  compute?: Record<string, string>;
  /** Columns that must still hold these values (IS NOT DISTINCT FROM), else nothing changes. */
  unchanged?: Record<string, unknown>;
}

/**
 * Changes a service's status and records it in service_events, in one statement: the row as it is now, with its
 * host's address, or undefined when the row was no longer in `from` (or `unchanged` no longer held).
 */
export async function transitionService<T = Record<string, unknown>>(
  client: Pick<Client, 'query'>,
  change: ServiceTransition,
): Promise<T | undefined> {
  const to = change.to ?? nextStatus(change.kind, change.from);
  if (!allowedTransition(change.kind, change.from, to))
    throw new IllegalServiceTransition(change.kind, change.from, to);
  const params: unknown[] = [change.serviceId, change.from, to, change.reason];
  const param = (value: unknown) => `$${params.push(value)}`;
  const assignments = [
    ...Object.entries(change.set ?? {}).map(([column, value]) => `${column} = ${param(value)}`),
    ...Object.entries(change.compute ?? {}).map(([column, sql]) => `${column} = ${sql}`),
  ];
  const guards = Object.entries(change.unchanged ?? {}).map(
    ([column, value]) => ` AND ${column} IS NOT DISTINCT FROM ${param(value)}`,
  );
  const { kind, code } = EVENTS[change.kind];
  const event = serviceEventSql(['id', `${param(kind)}::text`, '$2', '$3', `${param(code)}::text`, '$4'], 'changed');
  const others = [...assignments, 'updated_at = now()'].join(', ');
  const { rows } = await client.query(
    `WITH changed AS (UPDATE services SET status = $3, status_reason = $4, ${others}
                      WHERE id = $1 AND status = $2${guards.join('')} RETURNING *),
          logged AS (${event})
     SELECT changed.*, (SELECT public_url FROM streaming_hosts h WHERE h.id = changed.host_id) AS host_url
     FROM changed`,
    params,
  );
  return rows[0] as T | undefined;
}

/**
 * Shows why a service is as it is without changing its status (an enforcement, a relay that keeps failing), while
 * the service is `whileStatus` when given.
 */
export async function showServiceReason(
  sql: Queryable,
  serviceId: string,
  reason: string,
  whileStatus?: ServiceStatus,
): Promise<void> {
  await sql.query(
    `UPDATE services SET status_reason = $2, updated_at = now() WHERE id = $1${whileStatus ? ' AND status = $3' : ''}`,
    whileStatus ? [serviceId, reason, whileStatus] : [serviceId, reason],
  );
}

/** Takes a reason shown by showServiceReason away again, unless something else has replaced it since. */
export async function clearServiceReason(sql: Queryable, serviceId: string, shown: string): Promise<void> {
  await sql.query('UPDATE services SET status_reason = NULL, updated_at = now() WHERE id = $1 AND status_reason = $2', [
    serviceId,
    shown,
  ]);
}
