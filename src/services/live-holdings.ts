/** Who holds live services: the Icecast host they stream on, the API key that bought them, the address that paid. */
export type HolderScope = 'host' | 'key' | 'payer';

const HOLDER_COLUMN: Record<HolderScope, string> = { host: 'host_id', key: 'api_key_id', payer: 'payer' };
// The statuses that hold a place, as the partial indexes of migration 030 name them.
const HOLDS_A_PLACE = "s.status IN ('pending', 'provisioning', 'active', 'suspended')";

/**
 * One row for the holder $1 (or the SQL expression `holderOf`, e.g. a joined column): its live services (a place held, not expired), the listener places they were sold, and
 * when the next of them ends. Read from the counter PostgreSQL keeps (migration 030), less the services whose time is
 * up but whose status has not changed yet: a few index entries, however many services are live.
 */
export function liveHoldingSql(scope: HolderScope, holderOf = '$1'): string {
  const holder = `s.${HOLDER_COLUMN[scope]} = ${holderOf} AND ${HOLDS_A_PLACE}`;
  return `SELECT (COALESCE(kept.services, 0) - ended.services)::int AS live_services,
                 COALESCE(kept.listener_places, 0) - ended.listener_places AS listener_places,
                 (SELECT min(s.expires_at) FROM services s WHERE ${holder} AND s.expires_at > now()) AS next_expiry
            FROM (SELECT count(*) AS services, COALESCE(sum(listener_places(s.limits)), 0) AS listener_places
                    FROM services s WHERE ${holder} AND s.expires_at <= now()) ended
            LEFT JOIN service_holdings kept ON kept.scope = '${scope}' AND kept.holder = ${holderOf}`;
}
