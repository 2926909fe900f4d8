import { ApiError } from '../errors/index.js';
import type { Snapshot } from '../pricing/index.js';
import { liveHoldingSql, type StreamLoad } from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import { serviceLimitsOf, streamLoadOf } from './service-limits.js';

/** Who buys: the API key always, the paying address once the payment is sent. */
export interface Buyer {
  apiKeyId: string;
  payer?: string;
}

/** What one buyer holds now: live services and the listener places they were sold, and when the next one ends. */
interface Holding {
  live_services: number;
  listener_places: number;
  nextExpiry?: Date;
}

const IN_FLIGHT = `o.state IN ('settling', 'provisioning') AND NOT EXISTS (SELECT 1 FROM services s WHERE s.order_id = o.id)`;
// The live services (one row however many a buyer holds), then the paid orders not provisioned yet.
const held = (scope: 'key' | 'payer') => `SELECT h.live_services, h.listener_places, h.next_expiry, NULL AS product_id, NULL::jsonb AS configuration, NULL AS upgrade_of
                                          FROM (${liveHoldingSql(scope)}) h`;
const ORDERS_IN_FLIGHT = 'NULL, NULL, NULL, o.product_id, o.configuration, o.upgrade_of FROM orders o';
const HOLDING_SQL = {
  key: `${held('key')} UNION ALL SELECT ${ORDERS_IN_FLIGHT} WHERE o.api_key_id = $1 AND ${IN_FLIGHT}`,
  payer: `${held('payer')} UNION ALL SELECT ${ORDERS_IN_FLIGHT} WHERE o.payer = $1 AND ${IN_FLIGHT}`,
};

/**
 * One buyer may not take every stream: the rules of the buyer stage (rules/buyer-limits.json, limits in the catalog
 * settings) compare what an API key, and a paying address, hold with what the order adds. Checked for the key before
 * payment is asked, and with `client` for key and payer exactly when the verified payment is claimed, under locks per
 * key and per payer, so that two parallel orders cannot both take the last place. Throws 429 per_key_limit_reached
 * or per_payer_limit_reached.
 */
export async function checkBuyerLimits(db: Database, snapshot: Snapshot, buyer: Buyer, demand: StreamLoad, client?: Client): Promise<void> {
  const settings = snapshot.catalog.settings;
  if (!settings.buyer_limits || (demand.sources === 0 && demand.listeners === 0)) return;
  const payer = buyer.payer?.toLowerCase();
  if (client) {
    // Always key first, then payer: two claims never wait for each other in opposite orders.
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended('buyer limits key ' || $1, 0))", [buyer.apiKeyId]);
    if (payer) await client.query("SELECT pg_advisory_xact_lock(hashtextextended('buyer limits payer ' || $1, 0))", [payer]);
  }
  const [key, paying] = await Promise.all([
    holding(db, snapshot, 'key', buyer.apiKeyId, client),
    payer ? holding(db, snapshot, 'payer', payer, client) : undefined,
  ]);
  const asked = { live_services: demand.sources, listener_places: demand.listeners };
  const facts = {
    settings,
    demand: asked,
    key: withAfter(key, asked),
    ...(paying && { payer: { address: payer, ...withAfter(paying, asked) } }),
  };
  const outcome = await snapshot.rules.buyer.evaluate(facts, 6);
  const refusal = outcome.notOrderable[0];
  if (!refusal) return;
  const held = refusal.code === 'per_payer_limit_reached' && paying ? paying : key;
  const wait = held.nextExpiry ? Math.max(1, Math.ceil((held.nextExpiry.getTime() - Date.now()) / 1000)) : undefined;
  throw new ApiError(429, refusal.code,
    `${refusal.reason} Nothing was charged or stored. A place comes free when one of these services expires${wait ? ` (the next in ${wait} s, see Retry-After)` : ''}: send the request again then (the same Idempotency-Key is fine), or order fewer listeners.`,
    {
      retryable: wait !== undefined,
      ...(wait && { headers: { 'Retry-After': String(wait) } }),
      details: {
        limits: settings.buyer_limits,
        in_use: { key: counts(key), ...(paying && { payer: counts(paying) }) },
        asked,
      },
    });
}

async function holding(db: Database, snapshot: Snapshot, by: 'key' | 'payer', id: string, client?: Client): Promise<Holding> {
  type Row = {
    live_services: number | null; listener_places: string | null; next_expiry: Date | null;
    product_id: string | null; configuration: Record<string, unknown> | null; upgrade_of: string | null;
  };
  const rows = (client ? (await client.query(HOLDING_SQL[by], [id])).rows : await db.query(HOLDING_SQL[by], [id])) as Row[];
  const held: Holding = { live_services: 0, listener_places: 0 };
  for (const row of rows) {
    if (row.live_services !== null) {
      held.live_services += row.live_services;
      held.listener_places += Number(row.listener_places);
      if (row.next_expiry) held.nextExpiry = row.next_expiry;
      continue;
    }
    // A paid order not provisioned yet; an upgrade in flight counts its whole new listener count (on the safe side).
    const limits = serviceLimitsOf(snapshot.catalog.byId.get(row.product_id!)?.product, row.configuration ?? {});
    const added = streamLoadOf(limits, row.upgrade_of ? { limits: {} } : undefined);
    held.live_services += added.sources;
    held.listener_places += added.listeners;
  }
  return held;
}

function counts(held: Holding): { live_services: number; listener_places: number } {
  return { live_services: held.live_services, listener_places: held.listener_places };
}

function withAfter(held: Holding, asked: { live_services: number; listener_places: number }) {
  return {
    ...counts(held),
    live_services_after: held.live_services + asked.live_services,
    listener_places_after: held.listener_places + asked.listener_places,
  };
}
