import type { CapacityReserve } from '../catalog/index.js';
import { ApiError } from '../errors/index.js';
import type { Snapshot } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import { liveHoldingSql, type StreamLoad } from '../services/index.js';
import type { Client, Database, Row as StoredRow } from '../store/index.js';
import { keyHistory, payerHistory, type PaidHistory } from './paid-history.js';
import { serviceLimitsOf, streamLoadOf } from './service-limits.js';

/** Who buys: the API key always, the paying address once the payment is sent (verified only at claim time). */
export interface Buyer {
  apiKeyId: string;
  payer?: string;
}

/** What one buyer holds now: live services and the listener places they were sold, and when the next one ends. */
export interface Holding {
  live_services: number;
  listener_places: number;
  nextExpiry?: Date;
}

const IN_FLIGHT = `o.state IN ('settling', 'provisioning') AND o.retention_of IS NULL AND NOT EXISTS (SELECT 1 FROM services s WHERE s.order_id = o.id)`;
// The live services (one row however many a buyer holds), then the paid orders not provisioned yet.
const held = (
  scope: 'key' | 'payer',
) => `SELECT h.live_services, h.listener_places, h.next_expiry, NULL AS product_id, NULL::jsonb AS configuration, NULL AS upgrade_of
                                          FROM (${liveHoldingSql(scope)}) h`;
const ORDERS_IN_FLIGHT = 'NULL, NULL, NULL, o.product_id, o.configuration, o.upgrade_of FROM orders o';
const HOLDING_SQL = {
  key: `${held('key')} UNION ALL SELECT ${ORDERS_IN_FLIGHT} WHERE o.api_key_id = $1 AND ${IN_FLIGHT}`,
  payer: `${held('payer')} UNION ALL SELECT ${ORDERS_IN_FLIGHT} WHERE o.payer = $1 AND ${IN_FLIGHT}`,
};
// The key's ($1) and the payer's ($2) in one round trip, each row named by whose it is.
const KEY_AND_PAYER_SQL = `SELECT 'key' AS holder, k.* FROM (${HOLDING_SQL.key}) k
  UNION ALL SELECT 'payer', p.* FROM (${HOLDING_SQL.payer.replaceAll('$1', '$2')}) p`;

/** The host an order streams on: its limits, and what is in use and spoken for before this order. */
export interface HostLoad {
  limits: StreamLoad;
  load: StreamLoad;
}

/** Where a check stands: before payment (a payer only claimed) or at claim time, in `client`'s transaction. */
export interface BuyerCheck {
  client?: Client;
  host?: HostLoad;
  /** Before payment only: what the key holds, as the caller counted it lately (instead of reading it now). */
  keyHeld?: () => Promise<Holding>;
  /** With `client`: the caller already took the locks of BUYER_LOCK_COLUMNS in this transaction. */
  locked?: boolean;
  /** With `client`: the rows of heldStatement(), read by the caller in this transaction (JSON: see heldRows). */
  held?: StoredRow[];
}

/**
 * The buyer's locks as the columns of a SELECT whose $1 is the API key's id and $2 the payer (or null): always key
 * first, then payer (its select list is taken in order), so two claims never wait for each other in opposite orders.
 */
export const BUYER_LOCK_COLUMNS = `pg_advisory_xact_lock(hashtextextended('buyer limits key ' || $1, 0)),
  CASE WHEN $2::text IS NOT NULL THEN pg_advisory_xact_lock(hashtextextended('buyer limits payer ' || $2, 0)) END`;

/** Whether a check of this demand takes the buyer's locks at claim (see checkBuyerLimits). */
export function takesBuyerLocks(snapshot: Snapshot, demand: StreamLoad): boolean {
  return !!snapshot.catalog.settings.buyer_limits && (demand.sources > 0 || demand.listeners > 0);
}

/**
 * One buyer may not take every stream: the rules of the buyer stage (rules/buyer-limits.json, limits in the catalog
 * settings) compare what an API key, and a paying address, hold with what the order adds, and keep the last part of
 * the host (capacity_reserve) for wallets with paid history. Checked for the key before payment is asked, and with
 * `client` for key and payer exactly when the verified payment is claimed, under locks per key and per payer (and the
 * host's capacity lock the caller holds), so that two parallel orders cannot both take the last place. Throws 429
 * per_key_limit_reached or per_payer_limit_reached, or 503 capacity_reserved.
 */
export async function checkBuyerLimits(
  db: Database,
  snapshot: Snapshot,
  buyer: Buyer,
  demand: StreamLoad,
  check: BuyerCheck = {},
): Promise<void> {
  const settings = snapshot.catalog.settings;
  if (!settings.buyer_limits && !settings.capacity_reserve) return;
  if (demand.sources === 0 && demand.listeners === 0) return;
  const { client } = check;
  const payer = buyer.payer?.toLowerCase();
  const verified = client ? payer : undefined;
  if (client && settings.buyer_limits && !check.locked) {
    await client.query(`SELECT ${BUYER_LOCK_COLUMNS}`, [buyer.apiKeyId, verified ?? null]);
  }
  const none: Holding = { live_services: 0, listener_places: 0 };
  const asked = { live_services: demand.sources, listener_places: demand.listeners };
  const reserve = settings.capacity_reserve;
  const host = check.host && reserve ? hostFacts(check.host, reserve, demand) : undefined;
  const holders = settings.buyer_limits
    ? check.keyHeld && !client
      ? check.keyHeld().then((key): [Holding, undefined] => [key, undefined])
      : holdings(db, snapshot, buyer.apiKeyId, verified, client, check.held)
    : ([none, undefined] as const);
  const [[key, paying], history] = await Promise.all([
    holders,
    host?.beyond_newcomer_share ? historyOf(db, reserve!, buyer, client) : undefined,
  ]);
  const facts = {
    settings,
    demand: asked,
    key: withAfter(key, asked),
    ...(paying && { payer: { address: verified, ...withAfter(paying, asked) } }),
    ...(history && { host, history }),
  };
  const outcome = await snapshot.rules.buyer.evaluate(facts, 6);
  const refusal = outcome.notOrderable[0];
  if (!refusal) return;
  if (refusal.code === 'capacity_reserved') throw reserved(refusal.reason, reserve!, host!, history!);
  const held = refusal.code === 'per_payer_limit_reached' && paying ? paying : key;
  const wait = held.nextExpiry ? Math.max(1, Math.ceil((held.nextExpiry.getTime() - Date.now()) / 1000)) : undefined;
  throw new ApiError(
    429,
    refusal.code,
    `${refusal.reason} Nothing was charged or stored. A place comes free when one of these services expires${wait ? ` (the next in ${wait} s, see Retry-After)` : ''}: send the request again then (the same Idempotency-Key is fine), or order fewer listeners.`,
    {
      retryable: wait !== undefined,
      ...(wait && { retryAfterSeconds: wait }),
      details: {
        limits: settings.buyer_limits,
        in_use: { key: counts(key), ...(paying && { payer: counts(paying) }) },
        asked,
      },
    },
  );
}

/** The host as the reserve's rules read it: its size, its fill with this order, and the part newcomers may fill. */
function hostFacts({ limits, load }: HostLoad, reserve: CapacityReserve, demand: StreamLoad) {
  const newcomers = newcomerLimits(limits, reserve);
  const after = { sources: load.sources + demand.sources, listeners: load.listeners + demand.listeners };
  return {
    stream_slots: limits.sources,
    listener_places: limits.listeners,
    stream_slots_free: Math.max(0, limits.sources - load.sources),
    live_services_after: after.sources,
    listener_places_after: after.listeners,
    newcomer_stream_slots: newcomers.sources,
    newcomer_listener_places: newcomers.listeners,
    beyond_newcomer_share:
      (demand.sources > 0 && after.sources > newcomers.sources) ||
      (demand.listeners > 0 && after.listeners > newcomers.listeners),
  };
}

/** How much of a host an order from a newcomer may fill: newcomer_share of it, rounded down (exact decimals). */
export function newcomerLimits(limits: StreamLoad, reserve: CapacityReserve): StreamLoad {
  const share = new Decimal(String(reserve.newcomer_share));
  return {
    sources: share.times(limits.sources).floor().toNumber(),
    listeners: share.times(limits.listeners).floor().toNumber(),
  };
}

/**
 * The paying wallet's history: at claim the verified payer's, with a payment not verified yet the one it names (checked
 * again at claim), and before payment is asked the best of the wallets the API key is known to pay with.
 */
function historyOf(db: Database, reserve: CapacityReserve, buyer: Buyer, client?: Client): Promise<PaidHistory> {
  if (buyer.payer) return payerHistory(client ?? db, reserve, buyer.payer);
  return keyHistory(db, reserve, buyer.apiKeyId);
}

type HostFacts = ReturnType<typeof hostFacts>;

function reserved(reason: string, reserve: CapacityReserve, host: HostFacts, history: PaidHistory): ApiError {
  return new ApiError(
    503,
    'capacity_reserved',
    `${reason} Nothing was charged or stored. Retry later (places come free as streams expire; GET /availability says` +
      ' what a newcomer can buy now), ask for fewer listeners, or pay from a wallet with that history: before payment' +
      ' this service knows the wallet your API key was issued to (POST /keys, signed in with it) and the wallets that' +
      ' paid its orders; the paying wallet decides when the payment is verified.',
    {
      retryable: true,
      retryAfterSeconds: 300,
      details: {
        capacity_reserve: reserve,
        host: {
          stream_slots: host.stream_slots,
          newcomer_stream_slots: host.newcomer_stream_slots,
          listener_places: host.listener_places,
          newcomer_listener_places: host.newcomer_listener_places,
          live_services_after: host.live_services_after,
          listener_places_after: host.listener_places_after,
        },
        history: { paid: history.paid, of: history.who },
      },
    },
  );
}

/** What the key holds now (before payment). */
export async function keyHoldings(db: Database, snapshot: Snapshot, apiKeyId: string): Promise<Holding> {
  return (await holdings(db, snapshot, apiKeyId, undefined))[0];
}

/**
 * The statement that reads what the key and the payer hold (checkBuyerLimits at claim), its parameters numbered from
 * `first`, for a caller that sends it with another read; hand its rows back in BuyerCheck.held.
 */
export function heldStatement(apiKeyId: string, payer: string, first: number): [string, unknown[]] {
  const sql = KEY_AND_PAYER_SQL.replace(/\$([12])\b/g, (_, n: string) => `$${first + Number(n) - 1}`);
  return [sql, [apiKeyId, payer.toLowerCase()]];
}

/** What the key holds, and the payer when one is given (verified), from one statement. */
async function holdings(
  db: Database,
  snapshot: Snapshot,
  apiKeyId: string,
  payer: string | undefined,
  client?: Client,
  held?: StoredRow[],
): Promise<[Holding, Holding | undefined]> {
  type Row = {
    holder?: 'key' | 'payer';
    live_services: number | null;
    listener_places: string | null;
    next_expiry: Date | null;
    product_id: string | null;
    configuration: Record<string, unknown> | null;
    upgrade_of: string | null;
  };
  const [sql, params] = payer ? [KEY_AND_PAYER_SQL, [apiKeyId, payer]] : [HOLDING_SQL.key, [apiKeyId]];
  const rows = held
    ? // Read as JSON beside another statement: the expiry comes as text.
      (held as Row[]).map((row) => ({ ...row, next_expiry: row.next_expiry ? new Date(row.next_expiry) : null }))
    : ((client ? (await client.query(sql, params)).rows : await db.query(sql, params)) as Row[]);
  const key: Holding = { live_services: 0, listener_places: 0 };
  const paying: Holding | undefined = payer ? { live_services: 0, listener_places: 0 } : undefined;
  for (const row of rows) {
    const held = row.holder === 'payer' ? paying! : key;
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
  return [key, paying];
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
