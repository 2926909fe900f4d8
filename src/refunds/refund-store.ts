import { keccak256, toBytes } from 'viem';
import { randomId } from '../ids/index.js';
import type { RefundTransfer } from '../pricing/index.js';
import type { Client, Database } from '../store/index.js';

/** split: paid back by its parts, one refund per wallet that paid (part_of names the refund they are parts of). */
export type RefundStatus = 'computing' | 'pending' | 'sent' | 'failed' | 'none' | 'split';

export interface RefundRow {
  id: string;
  service_id: string | null;
  order_id: string | null;
  api_key_id: string;
  reason: 'stopped' | 'provisioning_failed';
  status: RefundStatus;
  part_of: string | null;
  order_ids: string[];
  payer: string | null;
  amount_atomic: string | null;
  evaluation_id: string | null;
  nonce: string;
  from_address: string | null;
  from_block: string | null;
  needs_approval: boolean;
  approved_at: Date | null;
  approved_by: string | null;
  pending_reason: string | null;
  transaction: string | null;
  proof: Record<string, unknown> | null;
  attempts: number;
  next_attempt_at: Date;
  as_of: Date;
  created_at: Date;
  sent_at: Date | null;
}

/** The refund's EIP-3009 nonce: derived from its id, so every send of one refund is the same authorization. */
export function refundNonce(id: string): `0x${string}` {
  return keccak256(toBytes(`agent-audio refund ${id}`));
}

const COLUMNS = [
  'id, service_id, order_id, api_key_id, reason, status, part_of, order_ids, payer, ',
  'amount_atomic::text AS amount_atomic, evaluation_id, nonce, from_address, ',
  'from_block::text AS from_block, needs_approval, approved_at, approved_by, pending_reason, ',
  'transaction, proof, attempts, next_attempt_at, as_of, created_at, sent_at',
].join('');

/** A refund's amount once computed: to send (pending), to send in parts (split), or nothing to send (none). */
interface ComputedFields extends PartFields {
  status: 'pending' | 'none' | 'split';
  amount: string;
  evaluationId: string;
  orderIds: string[];
  payer: string | null;
}

/** What every part of a split refund shares with the whole. */
interface PartFields {
  fromBlock: string | null;
  needsApproval: boolean;
  pendingReason: string | null;
}

/** The refunds outbox in PostgreSQL: a refund is committed with what it pays back, before anything is sent. */
export class RefundStore {
  constructor(private readonly db: Database) {}

  /** A service's stop refund, in the caller's transaction (created by it). */
  async insertStop(
    client: Client,
    service: { id: string; api_key_id: string },
    asOf: Date,
    leaseSeconds: number,
  ): Promise<RefundRow> {
    const id = randomId('rf_', 18);
    const {
      rows: [row],
    } = await client.query(
      `INSERT INTO refunds (id, service_id, api_key_id, reason, status, nonce, as_of, lease_until)
       VALUES ($1, $2, $3, 'stopped', 'computing', $4, $5, now() + make_interval(secs => $6)) RETURNING ${COLUMNS}`,
      [id, service.id, service.api_key_id, refundNonce(id), asOf, leaseSeconds],
    );
    return row as RefundRow;
  }

  /** A refund in full of one order that was paid and never provisioned, in the caller's transaction. */
  async insertFailure(
    client: Client,
    order: { id: string; api_key_id: string; service_id: string | null },
    asOf: Date,
  ): Promise<RefundRow> {
    const id = randomId('rf_', 18);
    const {
      rows: [row],
    } = await client.query(
      `INSERT INTO refunds (id, service_id, order_id, api_key_id, reason, status, nonce, as_of)
       VALUES ($1, $2, $3, $4, 'provisioning_failed', 'computing', $5, $6) RETURNING ${COLUMNS}`,
      [id, order.service_id, order.id, order.api_key_id, refundNonce(id), asOf],
    );
    return row as RefundRow;
  }

  async byId(id: string, client?: Client): Promise<RefundRow | undefined> {
    const sql = `SELECT ${COLUMNS} FROM refunds WHERE id = $1`;
    return client
      ? ((await client.query(sql, [id])).rows[0] as RefundRow | undefined)
      : (await this.db.query<RefundRow & Record<string, unknown>>(sql, [id]))[0];
  }

  async lockById(client: Client, id: string): Promise<RefundRow | undefined> {
    return (await client.query(`SELECT ${COLUMNS} FROM refunds WHERE id = $1 FOR UPDATE`, [id])).rows[0] as
      | RefundRow
      | undefined;
  }

  async stopOf(serviceId: string, client?: Client): Promise<RefundRow | undefined> {
    const sql = `SELECT ${COLUMNS} FROM refunds WHERE service_id = $1 AND reason = 'stopped' AND part_of IS NULL`;
    return client
      ? ((await client.query(sql, [serviceId])).rows[0] as RefundRow | undefined)
      : (await this.db.query<RefundRow & Record<string, unknown>>(sql, [serviceId]))[0];
  }

  /** Every refund that pays back this order (the stop of its service, or its own failure refund). */
  async forOrder(orderId: string): Promise<RefundRow[]> {
    return this.db.query<RefundRow & Record<string, unknown>>(
      `SELECT ${COLUMNS} FROM refunds WHERE ($1 = ANY(order_ids) OR order_id = $1) AND part_of IS NULL
       ORDER BY created_at`,
      [orderId],
    );
  }

  /** The parts of a split refund, one per wallet, in the order the evaluation named them. */
  async partsOf(id: string): Promise<RefundRow[]> {
    return this.db.query<RefundRow & Record<string, unknown>>(
      `SELECT ${COLUMNS} FROM refunds WHERE part_of = $1 ORDER BY created_at, id`,
      [id],
    );
  }

  /** The parts of a refund that goes back to several wallets, to be sent like any refund (their own nonces). */
  async insertParts(client: Client, whole: RefundRow, parts: RefundTransfer[], fields: PartFields): Promise<void> {
    for (const part of parts) {
      const id = randomId('rf_', 18);
      await client.query(
        `INSERT INTO refunds (id, service_id, api_key_id, reason, status, part_of, order_ids, payer, amount_atomic,
                              evaluation_id, nonce, from_block, needs_approval, pending_reason, as_of)
         VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
        [
          id,
          whole.service_id,
          whole.api_key_id,
          whole.reason,
          whole.id,
          part.order_ids,
          part.payer,
          part.amount_atomic,
          whole.evaluation_id,
          refundNonce(id),
          fields.fromBlock,
          fields.needsApproval,
          fields.pendingReason,
          whole.as_of,
        ],
      );
    }
  }

  /** What was already refunded (or is committed to be) for any of these orders, except by `exceptId`. */
  async refundedFor(client: Client, orderIds: string[], exceptId: string): Promise<string> {
    const {
      rows: [row],
    } = await client.query(
      `SELECT coalesce(sum(amount_atomic), 0)::text AS sum FROM refunds
       WHERE id <> $2 AND status IN ('pending', 'sent') AND (order_ids && $1::text[] OR order_id = ANY($1::text[]))`,
      [orderIds, exceptId],
    );
    return (row as { sum: string }).sum;
  }

  /** Refunds sent, or approved and waiting, in the last 24 hours: what the daily cap counts. */
  async committedToday(client: Client): Promise<bigint> {
    const {
      rows: [row],
    } = await client.query(
      `SELECT coalesce(sum(amount_atomic), 0)::text AS sum FROM refunds
       WHERE (status = 'sent' AND sent_at > now() - interval '1 day') OR (status = 'pending' AND (NOT needs_approval OR approved_at IS NOT NULL) AND created_at > now() - interval '1 day')`,
    );
    return BigInt((row as { sum: string }).sum);
  }

  async computed(client: Client, id: string, fields: ComputedFields): Promise<RefundRow> {
    const {
      rows: [row],
    } = await client.query(
      `UPDATE refunds SET status = $2, amount_atomic = $3, evaluation_id = $4, order_ids = $5, payer = $6, from_block = $7,
         needs_approval = $8, pending_reason = $9, lease_until = NULL, next_attempt_at = now(), updated_at = now()
       WHERE id = $1 AND status = 'computing' RETURNING ${COLUMNS}`,
      [
        id,
        fields.status,
        fields.amount,
        fields.evaluationId,
        fields.orderIds,
        fields.payer,
        fields.fromBlock,
        fields.needsApproval,
        fields.pendingReason,
      ],
    );
    return row as RefundRow;
  }

  /** Leases refunds due for work (stops whose amount is not committed, refunds to send); safe across instances. */
  async leaseDue(limit: number, leaseSeconds: number): Promise<RefundRow[]> {
    return this.db.query<RefundRow & Record<string, unknown>>(
      `UPDATE refunds SET lease_until = now() + make_interval(secs => $2), attempts = attempts + 1
       WHERE id IN (SELECT id FROM refunds
                    WHERE (status = 'computing' OR (status = 'pending' AND (NOT needs_approval OR approved_at IS NOT NULL) AND next_attempt_at <= now()))
                      AND (lease_until IS NULL OR lease_until < now())
                    ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
       RETURNING ${COLUMNS}`,
      [limit, leaseSeconds],
    );
  }

  /** Not sent this time: why, and when to try again (the lease is released). */
  async postpone(id: string, reason: string, delaySeconds: number, fromAddress?: string): Promise<void> {
    await this.db.query(
      `UPDATE refunds SET pending_reason = $2, next_attempt_at = now() + make_interval(secs => $3), lease_until = NULL,
         from_address = coalesce($4, from_address), updated_at = now() WHERE id = $1 AND status = 'pending'`,
      [id, reason, delaySeconds, fromAddress ?? null],
    );
  }

  async markSent(
    client: Client,
    id: string,
    fromAddress: string,
    transaction: string,
    proof: Record<string, unknown>,
  ): Promise<RefundRow | undefined> {
    const {
      rows: [row],
    } = await client.query(
      `UPDATE refunds SET status = 'sent', from_address = $2, transaction = $3, proof = $4, sent_at = now(), pending_reason = NULL,
         lease_until = NULL, updated_at = now() WHERE id = $1 AND status = 'pending' RETURNING ${COLUMNS}`,
      [id, fromAddress, transaction, proof],
    );
    return row as RefundRow | undefined;
  }

  async markFailed(client: Client, id: string, reason: string): Promise<RefundRow | undefined> {
    const {
      rows: [row],
    } = await client.query(
      `UPDATE refunds SET status = 'failed', pending_reason = $2, lease_until = NULL, updated_at = now() WHERE id = $1 AND status = 'pending' RETURNING ${COLUMNS}`,
      [id, reason],
    );
    return row as RefundRow | undefined;
  }

  /** Approves a refund waiting for an operator; for a split refund, each of its parts. The transfers approved. */
  async approve(id: string, by: string): Promise<RefundRow[]> {
    return this.db.query<RefundRow & Record<string, unknown>>(
      `UPDATE refunds SET approved_at = now(), approved_by = $2, next_attempt_at = now(), pending_reason = NULL, updated_at = now()
       WHERE (id = $1 OR part_of = $1) AND status = 'pending' AND needs_approval AND approved_at IS NULL
       RETURNING ${COLUMNS}`,
      [id, by],
    );
  }

  async list(limit = 100): Promise<RefundRow[]> {
    return this.db.query<RefundRow & Record<string, unknown>>(
      `SELECT ${COLUMNS} FROM refunds ORDER BY created_at DESC LIMIT $1`,
      [limit],
    );
  }
}
