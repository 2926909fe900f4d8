import { eventInsert, eventsInsert, orderPaidEvent, type NewEvent } from '../events/index.js';
import { PLACEMENT_LOCK_COLUMNS } from '../hosts/index.js';
import { KeyRevoked } from '../keys/index.js';
import type { ServiceInsert, ServiceRow } from '../services/index.js';
import { BatchedCalls, type Client, type Database } from '../store/index.js';
import { BUYER_LOCK_COLUMNS } from './buyer-limits.js';
import { claimConflictOf } from './claim-conflicts.js';
import { orderTransitionSql, type OrderState } from './order-transitions.js';

export type { OrderState } from './order-transitions.js';

export interface OrderRow {
  id: string;
  api_key_id: string;
  idempotency_key: string | null;
  /** The x402 payment-identifier the agent sent, if any (unique per API key while the order is not failed). */
  payment_id?: string | null;
  request_hash: string;
  product_id: string;
  billing: string;
  request: Record<string, unknown>;
  configuration: Record<string, unknown>;
  amount_atomic: string;
  quote_id: string | null;
  upgrade_of: string | null;
  /** For an extension: the service it adds paid time to (the hours are configuration.duration_hours). */
  extension_of?: string | null;
  /** For a retention: the service whose recordings it keeps (configuration.recording_ids, retention_days). */
  retention_of?: string | null;
  evaluation_id: string | null;
  network: string;
  asset: string;
  pay_to: string;
  payer: string;
  /** What the payer can spend only once, as payments/ reads it (the EIP-3009 nonce of an exact EVM payment). */
  payment_reference: string;
  /** Unix seconds from which the payment can no longer be settled. */
  payment_valid_until: string;
  /** The chain's height when the payment was verified; proof of payment is searched from there. */
  claim_block: string | null;
  /** The streaming host the order was placed on when its payment was claimed (null: claimed before placement). */
  host_id?: string | null;
  payment: Record<string, unknown>;
  requirements: Record<string, unknown>;
  state: OrderState;
  settlement: Record<string, unknown> | null;
  failure: string | null;
  created_at: Date;
  settled_at: Date | null;
  /** The facilitator its settlement was sent to (remote facilitators; null: none yet): the only one it may go to. */
  facilitator?: string | null;
}

export interface AuditEntry {
  id: string;
  kind: string;
  snapshotHash: string;
  text: string;
  hash: string;
}

const keyTaken = new Error('idempotency key taken');

/**
 * The payment's reference and valid-until columns keep the names of the first scheme (EIP-3009's nonce and
 * validBefore): the audit chain hashes order rows under those names. Only this store spells them.
 */
type StoredOrder = Omit<OrderRow, 'payment_reference' | 'payment_valid_until'> & {
  nonce: string;
  valid_before: string;
};

/** An order as PostgreSQL returns it, its payment columns named for what they mean. */
function orderOf(row: unknown): OrderRow;
function orderOf(row: unknown | undefined): OrderRow | undefined;
function orderOf(row: unknown): OrderRow | undefined {
  if (!row) return undefined;
  const { nonce, valid_before, ...rest } = row as StoredOrder;
  return { ...rest, payment_reference: nonce, payment_valid_until: valid_before };
}

/** The columns of a new order as PostgreSQL names them. */
function storedOf(order: NewOrder & Pick<OrderRow, 'host_id'>): Record<string, unknown> {
  const { payment_reference, payment_valid_until, ...rest } = order;
  return { ...rest, nonce: payment_reference, valid_before: payment_valid_until };
}

/**
 * Orders paid or being paid, not provisioned yet: what they will add to their Icecast is already spoken for. An
 * extension in flight is left out: it adds no stream, except when it brings an expired service back (rare and brief).
 */
export const IN_FLIGHT_ORDERS_SQL = `SELECT product_id, configuration, upgrade_of, host_id FROM orders o
  WHERE state IN ('settling', 'provisioning') AND extension_of IS NULL AND retention_of IS NULL
    AND NOT EXISTS (SELECT 1 FROM services s WHERE s.order_id = o.id)`;

export type InFlightOrder = Pick<OrderRow, 'product_id' | 'configuration' | 'upgrade_of' | 'host_id'>;

export type NewOrder = Omit<OrderRow, 'state' | 'settlement' | 'failure' | 'created_at' | 'settled_at' | 'facilitator'>;

/** Locks a claim takes with its key's check: the placement lock, and the buyer's (key and this payer). */
export interface ClaimLocks {
  placement?: boolean;
  buyer?: { payer: string | null };
}

function keyCheckWith(apiKeyId: string, locks: ClaimLocks): [string, Array<string | null>] {
  const keyCheck = 'SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE';
  const columns = [locks.placement && PLACEMENT_LOCK_COLUMNS, locks.buyer && BUYER_LOCK_COLUMNS].filter(Boolean);
  if (!columns.length) return [keyCheck, [apiKeyId]];
  // The subquery locks the key's row before the outer columns take the other locks, left to right.
  const sql = `SELECT ${columns.join(', ')} FROM (${keyCheck}) k`;
  return [sql, locks.buyer ? [apiKeyId, locks.buyer.payer] : [apiKeyId]];
}

// Every change of an order's state, each from orderTransitionSql (order-transitions.ts holds the table they obey).
const SETTLE = orderTransitionSql('settling', 'provisioning', ['settlement = $2', 'settled_at = now()'], '*');
const FAIL_UNPAID = orderTransitionSql('settling', 'failed', [
  'failure = $2',
  'released_idempotency_key = idempotency_key',
  'idempotency_key = NULL',
  'payment_id = NULL',
  'lease_until = NULL',
]);
const ACTIVATE = orderTransitionSql('provisioning', 'active', ['lease_until = NULL']);
const SETTLE_AND_ACTIVATE = orderTransitionSql(
  'settling',
  'active',
  ['settlement = $2', 'settled_at = $3', 'lease_until = NULL'],
  'settlement, updated_at',
);
const REFUND_UNDELIVERED = orderTransitionSql('provisioning', 'refunded', ['failure = $2', 'lease_until = NULL']);
const REFUND_CHARGED_FAILED = orderTransitionSql('failed', 'refunded', [
  'settlement = $2',
  'settled_at = now()',
  'chain_checked_at = now()',
  "failure = failure || '; its transfer went through on chain all the same (transaction ' || $3::text || " +
    "'): refunded in full'",
]);

/**
 * A paid order not delivered (not provisioned within the bound, or its service stopped meanwhile) ends refunded, in
 * the caller's transaction that puts its refund in the outbox; false when it had left "provisioning".
 */
export async function refundUndelivered(client: Client, id: string, failure: string): Promise<boolean> {
  return ((await client.query(REFUND_UNDELIVERED, [id, failure])).rowCount ?? 0) > 0;
}

/**
 * An order reported failed whose transfer the chain shows all the same ends refunded, with the settlement that
 * proves it, in the caller's transaction; false when it was no longer failed.
 */
export async function refundChargedFailed(
  client: Client,
  id: string,
  settlement: Record<string, unknown>,
  transaction: string,
): Promise<boolean> {
  return ((await client.query(REFUND_CHARGED_FAILED, [id, settlement, transaction])).rowCount ?? 0) > 0;
}

/**
 * Failed orders, each of which told its buyer that nothing was charged: all of them, or (`unchecked`) those the chain
 * has not yet shown taken or never takeable, the longest unchanged first.
 */
export async function failedOrders(db: Database, unchecked?: { limit: number }): Promise<OrderRow[]> {
  const rows = unchecked
    ? await db.query(
        "SELECT * FROM orders WHERE state = 'failed' AND chain_checked_at IS NULL ORDER BY updated_at LIMIT $1",
        [unchecked.limit],
      )
    : await db.query("SELECT * FROM orders WHERE state = 'failed' ORDER BY id");
  return rows.map((row) => orderOf(row));
}

/** The chain shows that a failed order's payment was never taken and never can be: it is not asked again. */
export async function chainChecked(db: Database, id: string): Promise<void> {
  await db.query('UPDATE orders SET chain_checked_at = now() WHERE id = $1', [id]);
}

/** Orders in PostgreSQL. Every state change is committed before the side effect that follows it. */
export class OrderStore {
  constructor(private readonly db: Database) {}

  /**
   * The order bound to this key, read in the same statement that checks the API key: a key revoked on any instance
   * is refused here (KeyRevoked), before a replay could hand out a paid order's credentials.
   */
  async byKey(apiKeyId: string, idempotencyKey: string): Promise<OrderRow | undefined> {
    return (await this.lookUp(apiKeyId, idempotencyKey)).order;
  }

  /**
   * byKey, and in the same statement the id of the order that used this payment (payer and reference) if any: a
   * paid request needs both before its payment is verified, in one round trip.
   */
  async lookUp(
    apiKeyId: string,
    idempotencyKey: string,
    authorization?: { payer: string; reference: string },
  ): Promise<{ order?: OrderRow; authorizationUsedBy?: string }> {
    const payer = authorization?.payer.toLowerCase() ?? null;
    const nonce = authorization?.reference.toLowerCase() ?? null;
    const found = await this.keyLookups.call({ apiKeyId, idempotencyKey, payer, nonce });
    if (!found.keyValid) throw new KeyRevoked();
    const authorizationUsedBy = found.usedBy ?? undefined;
    if (found.orderId === null) return { authorizationUsedBy };
    // Still bound to the key: a failed payment may have released it in between.
    const [order] = await this.db.query(
      'SELECT * FROM orders WHERE id = $1 AND api_key_id = $2 AND idempotency_key = $3',
      [found.orderId, apiKeyId, idempotencyKey],
    );
    return { order: orderOf(order), authorizationUsedBy };
  }

  /**
   * Every 402 starts with this look-up and nearly all find no order: the look-ups asked for at the same time go to
   * PostgreSQL as one statement (each still reads its key's revocation and its order together), since one round trip
   * per request cost more of a 402's CPU than anything else it does.
   */
  private readonly keyLookups = new BatchedCalls<
    { apiKeyId: string; idempotencyKey: string; payer: string | null; nonce: string | null },
    { keyValid: boolean; orderId: string | null; usedBy: string | null }
  >(async (lookups) => {
    const rows = await this.db.query<{ i: string; key_valid: boolean; id: string | null; used_by: string | null }>(
      `SELECT l.i, k.id IS NOT NULL AND k.revoked_at IS NULL AS key_valid, o.id, u.id AS used_by
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY
         AS l(api_key_id, idempotency_key, payer, nonce, i)
       LEFT JOIN api_keys k ON k.id = l.api_key_id
       LEFT JOIN orders o ON o.api_key_id = k.id AND o.idempotency_key = l.idempotency_key
       LEFT JOIN orders u ON u.payer = l.payer AND u.nonce = l.nonce`,
      [
        lookups.map((l) => l.apiKeyId),
        lookups.map((l) => l.idempotencyKey),
        lookups.map((l) => l.payer),
        lookups.map((l) => l.nonce),
      ],
    );
    const none = { keyValid: false, orderId: null, usedBy: null };
    const found: Array<{ keyValid: boolean; orderId: string | null; usedBy: string | null }> = lookups.map(() => none);
    for (const row of rows) {
      found[Number(row.i) - 1] = { keyValid: row.key_valid, orderId: row.id, usedBy: row.used_by };
    }
    return found;
  });

  async byId(id: string): Promise<OrderRow | undefined> {
    const [row] = await this.db.query('SELECT * FROM orders WHERE id = $1', [id]);
    return orderOf(row);
  }

  async byPaymentId(apiKeyId: string, paymentId: string): Promise<OrderRow | undefined> {
    const [row] = await this.db.query('SELECT * FROM orders WHERE api_key_id = $1 AND payment_id = $2', [
      apiKeyId,
      paymentId,
    ]);
    return orderOf(row);
  }

  /** The order paid with this payment (payer and reference). */
  async byPayment(payer: string, reference: string): Promise<OrderRow | undefined> {
    const [row] = await this.db.query('SELECT * FROM orders WHERE payer = $1 AND nonce = $2', [
      payer.toLowerCase(),
      reference.toLowerCase(),
    ]);
    return orderOf(row);
  }

  /** The evaluations that priced a service: its order's, then each paid upgrade's, oldest first. */
  async evaluationsOf(service: {
    id: string;
    order_id: string;
  }): Promise<Array<{ order_id: string; evaluation_id: string | null }>> {
    return this.db.query<{ order_id: string; evaluation_id: string | null }>(
      `SELECT id AS order_id, evaluation_id FROM orders WHERE state = 'active' AND (id = $1 OR upgrade_of = $2 OR extension_of = $2) ORDER BY created_at, id`,
      [service.order_id, service.id],
    );
  }

  /** Paid or being paid, not provisioned yet: what these orders will add to their Icecast is already spoken for. */
  async inFlight(client?: Client): Promise<InFlightOrder[]> {
    return (
      client ? (await client.query(IN_FLIGHT_ORDERS_SQL)).rows : await this.db.query(IN_FLIGHT_ORDERS_SQL)
    ) as InFlightOrder[];
  }

  /**
   * Claims the Idempotency-Key for a verified payment: the order starts in "settling" with a lease held by the caller.
   * `admit` runs first in the same transaction (it may refuse by throwing; what it returns, the host the order is
   * placed on, is stored with the order). Undefined when another request holds the
   * key; a unique violation throws its ClaimConflict (UpgradeInFlight, ExtensionInFlight, PaymentIdTaken,
   * AuthorizationUsed). `locks` are taken in the statement that checks the key, right after it and in this order: the
   * placement lock, then the buyer's locks (sent with BEGIN: one round trip for all; `admit` must not take them again).
   */
  async claim(
    order: NewOrder,
    record: AuditEntry,
    leaseSeconds: number,
    admit?: (client: Client) => Promise<Pick<NewOrder, 'host_id'> | void>,
    locks: ClaimLocks = {},
  ): Promise<OrderRow | undefined> {
    try {
      // The caller may have checked the key from a cache; FOR SHARE also holds off a revocation until this commits.
      const [sql, params] = keyCheckWith(order.api_key_id, locks);
      return await this.db.transaction(
        async (client, active) => {
          if (!active.length) throw new KeyRevoked();
          const placed = storedOf({ ...order, ...(await admit?.(client)) });
          const columns = Object.keys(placed);
          const values = Object.values(placed);
          // One statement: the evaluation record is appended for the inserted row only, after it, so the chain head is
          // still taken last (see migration 008); the evaluation's key is checked at commit.
          const n = columns.length;
          const {
            rows: [row],
          } = await client.query(
            `WITH claimed AS (
             INSERT INTO orders (${columns.join(', ')}, state, lease_until)
             VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')}, 'settling',
                     now() + make_interval(secs => $${n + 1}))
             ON CONFLICT (api_key_id, idempotency_key) DO NOTHING RETURNING *)
           SELECT claimed.*, audit_append($${n + 2}, $${n + 3}, $${n + 4}, $${n + 5}, $${n + 6}) AS appended_seq
           FROM claimed`,
            [...values, leaseSeconds, record.id, record.kind, record.snapshotHash, record.text, record.hash],
          );
          if (!row) throw keyTaken;
          const { appended_seq: _, ...claimed } = row;
          return orderOf(claimed);
        },
        { sql, params },
      );
    } catch (e) {
      if (e === keyTaken) return undefined;
      throw claimConflictOf(e);
    }
  }

  /**
   * Records the settlement and its order.paid event in one statement (in the caller's transaction when given); the
   * order as it is now (unchanged if it had already left "settling").
   */
  async settled(order: OrderRow, settlement: Record<string, unknown>, client?: Client): Promise<OrderRow> {
    const paid = eventInsert(orderPaidEvent({ ...order, settlement }), 3, 'paid');
    const sql = `WITH paid AS (${SETTLE}),
                 paid_event AS (${paid.sql})
                 SELECT * FROM paid`;
    const params = [order.id, settlement, ...paid.params];
    const record = async (c: Client) => orderOf((await c.query(sql, params)).rows[0]);
    const row = client ? await record(client) : await this.db.transaction(record);
    if (row) return row;
    return (
      client
        ? orderOf((await client.query('SELECT * FROM orders WHERE id = $1', [order.id])).rows[0])
        : await this.byId(order.id)
    )!;
  }

  /** The payment was not taken: the order fails and its Idempotency-Key is free for another attempt. */
  async failedUnpaid(id: string, reason: string): Promise<void> {
    await this.db.query(FAIL_UNPAID, [id, reason]);
  }

  /** Activates a provisioned order and records `event` (its service.active or the like) in the same statement. */
  async activate(client: Client, id: string, event: NewEvent): Promise<OrderRow | undefined> {
    const provisioned = eventInsert(event, 2, 'active');
    const {
      rows: [row],
    } = await client.query(
      `WITH active AS (${ACTIVATE} RETURNING *),
            provisioned_event AS (${provisioned.sql})
       SELECT * FROM active`,
      [id, ...provisioned.params],
    );
    return orderOf(row);
  }

  /**
   * activate() for an order's new service: the service's INSERT (numbered from $2), the activation and its event in
   * one statement. Undefined when the order already had a service (nothing inserted, nothing activated); `order`
   * undefined when the service was inserted but the order was no longer being provisioned (it was not activated).
   */
  async activateWithNewService(
    client: Client,
    order: OrderRow,
    insert: ServiceInsert,
    event: NewEvent,
  ): Promise<{ service: ServiceRow; order?: OrderRow } | undefined> {
    const first = 2 + insert.params.length;
    const provisioned = eventInsert(event, first, 'active');
    const {
      rows: [row],
    } = await client.query(
      `WITH provisioned AS (${insert.sql}),
            active AS (${ACTIVATE} AND EXISTS (SELECT 1 FROM provisioned) RETURNING updated_at),
            provisioned_event AS (${provisioned.sql})
       SELECT provisioned.*, (SELECT updated_at FROM active) AS activated_at FROM provisioned`,
      [order.id, ...insert.params, ...provisioned.params],
    );
    if (!row) return undefined;
    const { activated_at: activatedAt, ...service } = row as ServiceRow & { activated_at: Date | null };
    // The activation changes these columns only (no trigger rewrites an order row).
    const active = activatedAt && { ...order, state: 'active' as const, lease_until: null, updated_at: activatedAt };
    return { service, ...(active && { order: active }) };
  }

  /**
   * A new stream's settlement, its service, its activation and their events (order.paid, then `provisioned`) in one
   * statement that commits by itself: settling → active, one chained order state for both (migration 008's trigger
   * sees one change of the row). `insert` must be numbered from 4 and inserted only if the CTE `paid` returns a row.
   * Undefined when nothing was changed (the order had left "settling"); the order as it is then, with its service, if
   * the service was inserted.
   */
  async settleIntoNewService(
    order: OrderRow,
    settlement: Record<string, unknown>,
    settledAt: Date,
    insert: ServiceInsert,
    provisioned: NewEvent,
  ): Promise<{ order: OrderRow; service?: ServiceRow } | undefined> {
    const first = 4 + insert.params.length;
    const events = eventsInsert([orderPaidEvent({ ...order, settlement }), provisioned], first, 'provisioned');
    const [row] = await this.db.query<Record<string, unknown>>(
      `WITH paid AS (${SETTLE_AND_ACTIVATE}),
            provisioned AS (${insert.sql}),
            provisioned_events AS (${events.sql})
       SELECT provisioned.*, paid.settlement AS paid_settlement, paid.updated_at AS activated_at
       FROM paid LEFT JOIN provisioned ON true`,
      [order.id, settlement, settledAt, ...insert.params, ...events.params],
    );
    if (!row) return undefined;
    const { paid_settlement: paidSettlement, activated_at: activatedAt, ...service } = row;
    // The settlement and the activation change these columns only (no trigger rewrites an order row).
    const active = {
      ...order,
      state: 'active' as const,
      settlement: paidSettlement as Record<string, unknown>,
      settled_at: settledAt,
      lease_until: null,
      updated_at: activatedAt as Date,
    };
    return { order: active, ...(service.id !== null && { service: service as unknown as ServiceRow }) };
  }

  /**
   * Records the facilitator a settling order's payment is about to be sent to (null: it was sent nowhere after all).
   * Committed before the request leaves: a crash mid-settlement leaves it known where the payment may have gone.
   */
  async sentTo(orderId: string, facilitator: string | null): Promise<void> {
    await this.db.query(`UPDATE orders SET facilitator = $2 WHERE id = $1 AND state = 'settling'`, [
      orderId,
      facilitator,
    ]);
  }

  /** Takes leases on unfinished orders whose lease ran out (a crashed or slow instance); safe across instances. */
  async leaseStale(limit: number, leaseSeconds: number): Promise<string[]> {
    const rows = await this.db.query<{ id: string }>(
      `UPDATE orders SET lease_until = now() + make_interval(secs => $2), attempts = attempts + 1
       WHERE id IN (SELECT id FROM orders WHERE state IN ('settling', 'provisioning') AND (lease_until IS NULL OR lease_until < now())
                    ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       RETURNING id`,
      [limit, leaseSeconds],
    );
    return rows.map((r) => r.id);
  }
}
