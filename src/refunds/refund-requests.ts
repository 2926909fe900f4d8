import type { Database } from '../store/index.js';
import { payerOf, type PaidRow } from './refund-terms.js';

/** A settled payment a refund request names: the order (or upgrade, or extension) it paid and the service it bought. */
export interface RequestedPayment {
  order_id: string;
  state: string;
  network: string;
  amount_atomic: string;
  payment_id: string | null;
  /** The wallet the payment's own Transfer log names. */
  payer: string;
  service_id: string | null;
}

/** A refund request as it was answered: by the stop refund it led to, or by its denial. */
export interface RecordedRefundRequest {
  idempotency_key: string;
  request_digest: string;
  payer: string | null;
  order_id: string | null;
  service_id: string | null;
  refund_id: string | null;
  amount_atomic: string;
  denial_reason: string | null;
  denial_message: string | null;
}

const RECORDED = `idempotency_key, request_digest, payer, order_id, service_id, refund_id,
  amount_atomic::text AS amount_atomic, denial_reason, denial_message`;

/** Refund requests in the proposed x402 form (table refund_requests) and the payments they name. */
export class RefundRequests {
  constructor(private readonly db: Database) {}

  /** The payment settled by this transaction, if it paid us. */
  async payment(txHash: string): Promise<RequestedPayment | undefined> {
    const [row] = await this.db.query<PaidRow & Omit<RequestedPayment, 'payer'> & Record<string, unknown>>(
      `SELECT o.id AS order_id, o.state, o.network, o.amount_atomic::text AS amount_atomic, o.payment_id, o.payer,
              o.settlement, COALESCE(s.id, o.upgrade_of, o.extension_of) AS service_id
       FROM orders o LEFT JOIN services s ON s.order_id = o.id
       WHERE lower(o.settlement ->> 'transaction') = lower($1) LIMIT 1`,
      [txHash],
    );
    if (!row) return undefined;
    return {
      order_id: row.order_id,
      state: row.state,
      network: row.network,
      amount_atomic: row.amount_atomic,
      payment_id: row.payment_id,
      payer: payerOf(row),
      service_id: row.service_id,
    };
  }

  async recorded(idempotencyKey: string): Promise<RecordedRefundRequest | undefined> {
    const [row] = await this.db.query<RecordedRefundRequest & Record<string, unknown>>(
      `SELECT ${RECORDED} FROM refund_requests WHERE idempotency_key = $1`,
      [idempotencyKey],
    );
    return row;
  }

  /** Records an answer; when another request under the same key was recorded first, that one is returned instead. */
  async record(answer: RecordedRefundRequest): Promise<RecordedRefundRequest> {
    const [row] = await this.db.query<RecordedRefundRequest & Record<string, unknown>>(
      `INSERT INTO refund_requests (idempotency_key, request_digest, payer, order_id, service_id, refund_id,
                                    amount_atomic, denial_reason, denial_message)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (idempotency_key) DO NOTHING RETURNING ${RECORDED}`,
      [
        answer.idempotency_key,
        answer.request_digest,
        answer.payer,
        answer.order_id,
        answer.service_id,
        answer.refund_id,
        answer.amount_atomic,
        answer.denial_reason,
        answer.denial_message,
      ],
    );
    return row ?? (await this.recorded(answer.idempotency_key))!;
  }
}
