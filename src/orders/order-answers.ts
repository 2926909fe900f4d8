import { canonicalJson, type AuditLog } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import type { Checkout, Offer, SentPayment } from '../payments/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';
import { orderDocument, refundedError, settlementOf } from './order-document.js';
import type { OrderRow, OrderStore } from './order-store.js';
import { placeMessages as m } from './place-messages.js';
import { storedPayment } from './sale.js';

export interface PlacedOrder {
  body: { ok: true; order: Record<string, unknown>; service: unknown; idempotent_replay: boolean };
  paymentResponse: string;
}

export interface OrderAnswersOptions {
  orders: OrderStore;
  services: ServiceRecords;
  audit: AuditLog;
  checkout: Checkout;
  /** How long a repeat waits for the first request with the same key before answering 409 idempotency_in_progress. */
  waitForInFlightMs: number;
}

/** A 409 the agent resolves by sending the same request again in a second. */
export function retryNow() {
  return { retryable: true, retryAfterSeconds: 1 };
}

/** What a paid request is answered once its order exists: the order with its service, or why not (yet). */
export class OrderAnswers {
  constructor(private readonly options: OrderAnswersOptions) {}

  /** A request with a key that is already bound: same body → the same order (possibly after waiting), other body → 409. */
  async repeat(existing: OrderRow, requestHash: string, resourceUrl: string): Promise<PlacedOrder> {
    if (existing.request_hash !== requestHash) {
      throw new ApiError(409, 'idempotency_key_reused', m.keyReused);
    }
    const deadline = Date.now() + this.options.waitForInFlightMs;
    let order: OrderRow | undefined = existing;
    while (order && order.state !== 'active' && order.state !== 'refunded' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      order = await this.options.orders.byId(existing.id);
    }
    if (order?.state === 'active') return this.respond(order, true, resourceUrl);
    if (order?.state === 'refunded') throw refundedError(order);
    if (order?.state === 'failed') {
      throw new ApiError(409, 'idempotency_in_progress', m.earlierAttemptFailed, retryNow());
    }
    throw new ApiError(409, 'idempotency_in_progress', m.stillInProgress, retryNow());
  }

  /**
   * A payment-identifier already bound to an order of this API key: the very same payment for the same request is a
   * resend (whatever its Idempotency-Key) and gets that order; anything else under that id is refused.
   */
  samePayment(order: OrderRow, requestHash: string, sent: SentPayment, resourceUrl: string): Promise<PlacedOrder> {
    if (
      order.request_hash !== requestHash ||
      canonicalJson(order.payment) !== canonicalJson(storedPayment(sent.payload))
    ) {
      throw new ApiError(409, 'payment_id_conflict', m.paymentIdConflict(order));
    }
    return this.repeat(order, requestHash, resourceUrl);
  }

  /** The payment already pays for an order: this request's own (a concurrent retry) or another one. */
  async paidBy(
    order: OrderRow,
    request: { apiKeyId: string; idempotencyKey: string; requestHash: string; resourceUrl: string },
    offer: Offer,
  ): Promise<PlacedOrder> {
    if (order.state === 'failed') {
      throw await offer.paymentRequired('payment_failed', m.notTaken(order.failure ?? 'settlement_failed'));
    }
    if (order.api_key_id === request.apiKeyId && order.idempotency_key === request.idempotencyKey) {
      return this.repeat(order, request.requestHash, request.resourceUrl);
    }
    throw new ApiError(409, 'payment_already_used', m.paymentAlreadyUsed);
  }

  /** The service an order bought or changed. */
  serviceOf(order: OrderRow): Promise<ServiceRow | undefined> {
    const target = order.upgrade_of ?? order.extension_of ?? order.retention_of;
    return target ? this.options.services.byId(target) : this.options.services.forOrder(order.id);
  }

  async respond(
    order: OrderRow,
    replay: boolean,
    resourceUrl: string,
    provisioned?: ServiceRow,
    /** The evaluation record's hash when this request just appended it: no need to read it back. */
    evaluationHash?: string,
  ): Promise<PlacedOrder> {
    const { audit, checkout, services } = this.options;
    const readHash = checkout.signsReceipts && order.evaluation_id && !evaluationHash;
    const [service, evaluation] = await Promise.all([
      provisioned ?? this.serviceOf(order),
      readHash ? audit.get(order.evaluation_id!) : undefined,
    ]);
    if (order.state !== 'active' || !service) throw new Error(`order ${order.id} is ${order.state} without a service`);
    const settlement = settlementOf(order);
    const paymentResponse = await checkout.paymentResponse(settlement, {
      resourceUrl,
      payer: settlement.payer ?? order.payer,
      network: settlement.network,
      transaction: settlement.transaction,
      issuedAt: order.settled_at ?? order.created_at,
      orderId: order.id,
      evaluationId: order.evaluation_id,
      evaluationHash: evaluationHash ?? evaluation?.record_hash ?? null,
      amountAtomic: order.amount_atomic,
    });
    return {
      body: { ok: true, order: orderDocument(order), service: services.document(service), idempotent_replay: replay },
      paymentResponse,
    };
  }
}
