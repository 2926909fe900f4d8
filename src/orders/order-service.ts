import { canonicalJson, sha256, type AuditLog } from '../audit/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { ApiError } from '../errors/index.js';
import type { HostPlacement } from '../hosts/index.js';
import { isRefusal, type Checkout, type Offer, type SentPayment, type VerifiedPayment } from '../payments/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import { Admission } from './admission.js';
import { advance, type AdvanceDeps } from './advance.js';
import { takesBuyerLocks } from './buyer-limits.js';
import { ClaimConflict, PaymentIdTaken } from './claim-conflicts.js';
import { crashPoint, pausePoint } from './crash-point.js';
import { claimConflictError, notDelivered } from './not-delivered.js';
import { OrderAnswers, retryNow, type PlacedOrder } from './order-answers.js';
import { orderDocument } from './order-document.js';
import type { ClaimLocks, OrderRow, OrderStore } from './order-store.js';
import { refusalError } from './payment-refusal-error.js';
import { placeMessages as m } from './place-messages.js';
import { PriceMemo } from './price-memo.js';
import { auditEntryOf, newOrderOf, type Attempt, type PlaceOrder, type Sale } from './sale.js';

export type { PlaceOrder, PlacedOrder };

/** The order this request claimed, and the hash of the evaluation record appended with it. */
interface Claimed {
  order: OrderRow;
  evaluationHash: string;
}

/** A step of place() found the order this request already placed: the answer is that order. */
interface Replayed {
  placed: PlacedOrder;
}

export interface OrderServiceOptions {
  db: Database;
  live: LiveSnapshot;
  audit: AuditLog;
  orders: OrderStore;
  services: ServiceRecords;
  /** Offers, verifies and settles payments (src/payments). */
  checkout: Checkout;
  /** What settling and provisioning an order run on (shared with recovery). */
  advance: AdvanceDeps;
  leaseSeconds: number;
  /** Places new streams on the pool's hosts; without it (no streaming) nothing is counted. */
  placement?: HostPlacement;
  /** How long a repeat waits for the first request with the same key before answering 409 idempotency_in_progress. */
  waitForInFlightMs: number;
  /** A paid order not provisioned by then is refunded in full (src/refunds): what a 503 provisioning_pending says. */
  refundAfterMs?: number;
}

/** A paid operation: price → 402, or verify → claim the key → settle → provision → the order and its service. */
export class OrderService {
  private readonly prices = new PriceMemo();
  private readonly admission: Admission;
  private readonly answers: OrderAnswers;

  constructor(private readonly options: OrderServiceOptions) {
    this.admission = new Admission({ db: options.db, placement: options.placement });
    this.answers = new OrderAnswers(options);
  }

  async place(input: PlaceOrder): Promise<PlacedOrder> {
    const attempt = await this.replayOf(input);
    if ('placed' in attempt) return attempt.placed;
    const sale = await this.priceSale(attempt);
    const buyer = { apiKeyId: attempt.apiKeyId, payer: attempt.sent?.payer };
    await this.admission.beforePayment(sale.snapshot, buyer, sale.demand);
    const offer = await this.offerFor(attempt, sale);
    const sent = await this.acceptPayment(attempt, offer);
    if ('placed' in sent) return sent.placed;
    const payment = await this.verifyPayment(attempt, offer, sent);
    if ('placed' in payment) return payment.placed;
    const claimed = await this.claimOrder(attempt, sale, offer, payment);
    if ('placed' in claimed) return claimed.placed;
    return this.deliver(claimed, attempt, offer);
  }

  /**
   * The order this request already placed: by its Idempotency-Key, or by the payment-identifier of its payment. Looked
   * up before pricing and verification: a resend of a paid payload must find its order even after the price changed or
   * the payment was spent. Otherwise the attempt to go on with.
   */
  private async replayOf(input: PlaceOrder): Promise<Attempt | Replayed> {
    const { checkout, orders } = this.options;
    const requestHash = sha256(canonicalJson(input.sale.request));
    const sent = input.paymentSignature ? checkout.read(input.paymentSignature) : undefined;
    const signed = sent && { payer: sent.payer, reference: sent.reference };
    const found = await orders.lookUp(input.apiKeyId, input.idempotencyKey, signed);
    if (found.order) return { placed: await this.answers.repeat(found.order, requestHash, input.resourceUrl) };
    const paymentId = sent && this.paymentIdOf(sent);
    const attempt = { ...input, requestHash, sent, paymentId, authorizationUsedBy: found.authorizationUsedBy };
    if (!paymentId) return attempt;
    const paidWithId = await orders.byPaymentId(input.apiKeyId, paymentId);
    if (!paidWithId) return attempt;
    return { placed: await this.answers.samePayment(paidWithId, requestHash, sent, input.resourceUrl) };
  }

  /** The payer's payment-identifier; a malformed one is refused before anything else happens. */
  private paymentIdOf(sent: SentPayment): string | undefined {
    const found = this.options.checkout.paymentId(sent);
    if (found && 'invalid' in found) {
      throw new ApiError(400, 'payment_id_invalid', m.paymentIdInvalid(found.invalid));
    }
    return found?.id;
  }

  /** The price of the sale, and what it asks of capacity, on the snapshot served now. */
  private async priceSale(attempt: Attempt): Promise<Sale> {
    const { db, live } = this.options;
    const snapshot = live.current;
    const priced = await attempt.sale.price({ snapshot, db, apiKeyId: attempt.apiKeyId, prices: this.prices });
    return { ...priced, snapshot, demand: attempt.sale.demand(priced) };
  }

  /** The payment terms for the sale, and its 402 answers: each carries them in PAYMENT-REQUIRED. */
  private offerFor(attempt: Attempt, sale: Sale): Promise<Offer> {
    const resource = {
      url: attempt.resourceUrl,
      description: sale.description,
      ...(attempt.discovery && { serviceName: attempt.discovery.serviceName, tags: attempt.discovery.tags }),
    };
    return this.options.checkout.offer(sale.amountAtomic, resource, attempt.discovery?.declaration);
  }

  /**
   * The payment sent, if its terms can pay for this sale (payments/ says why not) and it is not used yet, or used by
   * this very request: its order. Without one, the 402 that says what to pay.
   */
  private async acceptPayment(attempt: Attempt, offer: Offer): Promise<SentPayment | Replayed> {
    const accepted = this.options.checkout.accept(offer, {
      signature: attempt.paymentSignature,
      sent: attempt.sent,
      resourceUrl: attempt.resourceUrl,
    });
    if (isRefusal(accepted)) throw await refusalError(offer, accepted);
    // Looked up with the key (replayOf); the claim's unique (payer, reference) finally keeps it from paying twice.
    const usedBy = attempt.authorizationUsedBy && (await this.options.orders.byId(attempt.authorizationUsedBy));
    if (usedBy) return { placed: await this.answers.paidBy(usedBy, attempt, offer) };
    return accepted;
  }

  /** The payment as the facilitator verified it, or the order a concurrent identical request paid with it. */
  private async verifyPayment(attempt: Attempt, offer: Offer, sent: SentPayment): Promise<VerifiedPayment | Replayed> {
    const verified = await this.options.checkout.verify(offer, sent);
    if (!isRefusal(verified)) return verified;
    if (verified.refused === 'rejected') {
      // A concurrent identical request may have claimed the key and spent this payment meanwhile.
      const claimedMeanwhile = await this.options.orders.byPayment(sent.payer, sent.reference);
      if (claimedMeanwhile) return { placed: await this.answers.paidBy(claimedMeanwhile, attempt, offer) };
    }
    throw await refusalError(offer, verified);
  }

  /**
   * Claims the Idempotency-Key with the order and its audit record, once the sale is checked again under locks (it
   * must still fit). Another request holding the key, or an order already paid with the same payment-identifier, is
   * this request's order.
   */
  private async claimOrder(
    attempt: Attempt,
    sale: Sale,
    offer: Offer,
    payment: VerifiedPayment,
  ): Promise<Claimed | Replayed> {
    const { audit, orders, leaseSeconds } = this.options;
    await audit.saveSnapshot(sale.snapshot);
    const entry = auditEntryOf(sale);
    const order = newOrderOf(attempt, sale, offer, payment, entry.id);
    let claimed: OrderRow | undefined;
    const locks = this.claimLocks(attempt, sale, payment.payer);
    try {
      const stillFits = (client: Client) => this.stillFits(client, attempt, sale, payment.payer, locks);
      claimed = await orders.claim(order, entry, leaseSeconds, stillFits, locks);
    } catch (e) {
      // Refused at claim although the counts before payment let it through: they are read again.
      this.admission.forget();
      return { placed: await this.claimRefused(e, attempt, payment) };
    }
    // This instance's own sale is seen at once; other instances' within a second.
    if (claimed && attempt.sale.newStream) this.admission.countSale(claimed, sale.demand.load);
    else this.admission.forget();
    if (claimed) return { order: claimed, evaluationHash: entry.hash };
    const winner = await orders.byKey(attempt.apiKeyId, attempt.idempotencyKey);
    if (winner) return { placed: await this.answers.repeat(winner, attempt.requestHash, attempt.resourceUrl) };
    throw new ApiError(409, 'idempotency_in_progress', m.keyReleased, retryNow());
  }

  /**
   * The locks a new stream's claim takes with its key's check, in one statement (an upgrade or an extension locks its
   * service first, then these, in stillFits).
   */
  private claimLocks(attempt: Attempt, sale: Sale, payer: string): ClaimLocks {
    if (!attempt.sale.newStream) return {};
    return {
      placement: this.admission.placesStreams(sale.demand.load),
      ...(takesBuyerLocks(sale.snapshot, sale.demand.load) && { buyer: { payer: payer.toLowerCase() } }),
    };
  }

  /** The checks before payment, again and exactly, under the locks of the claim. */
  private async stillFits(
    client: Client,
    attempt: Attempt,
    sale: Sale,
    payer: string,
    locked: ClaimLocks,
  ): Promise<{ host_id: string | null }> {
    await attempt.sale.stillFits(client, this.options.live.current);
    const buyer = { apiKeyId: attempt.apiKeyId, payer };
    return this.admission.atClaim(client, sale.snapshot, buyer, sale.demand, locked);
  }

  /** Why the claim failed, as the agent reads it; the order already paid with this payment-identifier is a replay. */
  private async claimRefused(e: unknown, attempt: Attempt, payment: SentPayment): Promise<PlacedOrder> {
    const conflict = claimConflictError(e);
    if (conflict) throw conflict;
    if (e instanceof PaymentIdTaken && attempt.paymentId) {
      const paidWithId = await this.options.orders.byPaymentId(attempt.apiKeyId, attempt.paymentId);
      if (paidWithId) return this.answers.samePayment(paidWithId, attempt.requestHash, payment, attempt.resourceUrl);
    }
    if (e instanceof ClaimConflict) throw new ApiError(409, 'payment_already_used', m.paymentAlreadyUsed);
    throw e;
  }

  /** Settles and provisions the claimed order: the service, or what the agent does next. */
  private async deliver(claim: Claimed, attempt: Attempt, offer: Offer): Promise<PlacedOrder> {
    const { order: claimed, evaluationHash } = claim;
    crashPoint('after_claim');
    await pausePoint('after_claim');
    try {
      const done = await advance(claimed, this.options.advance, 'request');
      crashPoint('after_provision');
      return await this.answers.respond(done.order, false, attempt.resourceUrl, done.service, evaluationHash);
    } catch (e) {
      // Counted as sold (countSale); what it holds now is read again.
      this.admission.forget();
      throw await notDelivered(e, claimed, offer, this.options);
    }
  }

  async get(apiKeyId: string, orderId: string): Promise<Record<string, unknown> | undefined> {
    const order = await this.options.orders.byId(orderId);
    if (!order || order.api_key_id !== apiKeyId) return undefined;
    const service = await this.answers.serviceOf(order);
    return { order: orderDocument(order), service: service ? this.options.services.document(service) : null };
  }

  /** What priced a service: the evaluation of its order, or of its latest paid upgrade, and all of them in order. */
  async pricedBy(
    service: ServiceRow,
  ): Promise<{ evaluation_id: string | null; evaluations: Array<{ order_id: string; evaluation_id: string | null }> }> {
    const evaluations = await this.options.orders.evaluationsOf(service);
    return { evaluation_id: evaluations.at(-1)?.evaluation_id ?? null, evaluations };
  }
}
