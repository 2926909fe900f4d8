/** Anything with a query method: a pooled database or a transaction's client. */
export interface Queryable {
  query(sql: string, params: unknown[]): Promise<unknown>;
}

/** One line of a service's history (GET /services/{id}/usage shows the last ones). */
export interface ServiceEvent {
  serviceId: string;
  /** transition, upgrade, extend, enforce, move */
  kind: string;
  code?: string | null;
  reason: string;
  from?: string | null;
  to?: string | null;
}

/**
 * The INSERT of service events: the values are SQL expressions (service_id, kind, from_status, to_status, code,
 * reason), selected from `source` when given (a CTE of the statement it runs in), kept where `where` holds.
 */
export function serviceEventSql(values: readonly string[], source?: string, where?: string): string {
  return `INSERT INTO service_events (service_id, kind, from_status, to_status, code, reason)
          SELECT ${values.join(', ')}${source ? ` FROM ${source}` : ''}${where ? ` WHERE ${where}` : ''}`;
}

/**
 * Records an event in a service's history. With `oncePerMinute`, not when the service already has one of the same
 * code in the last minute (refusals repeated by the hundred say nothing more).
 */
export async function recordServiceEvent(
  sql: Queryable,
  event: ServiceEvent,
  options: { oncePerMinute?: boolean } = {},
): Promise<void> {
  const recent = `NOT EXISTS (SELECT 1 FROM service_events
                              WHERE service_id = $1 AND code = $5 AND at > now() - interval '1 minute')`;
  await sql.query(
    serviceEventSql(
      ['$1::text', '$2::text', '$3::text', '$4::text', '$5::text', '$6::text'],
      undefined,
      options.oncePerMinute ? recent : undefined,
    ),
    [event.serviceId, event.kind, event.from ?? null, event.to ?? null, event.code ?? null, event.reason],
  );
}
