import { canonicalJson, sha256, type AuditLog } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import {
  PaymentGateway,
  type PaymentPrecheck,
  type PaymentPayload,
  type SentPayment,
  type SettleResponse,
} from '../payments/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { Snapshot } from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { HostPlacement, PoolHost } from '../hosts/index.js';
import { ServiceStopped, type ServiceRecords, type ServiceRow, type StreamLoad } from '../services/index.js';
import type { Client, Database, Row } from '../store/index.js';
import { advance, PaymentNotTaken, SettlementPending, type AdvanceDeps } from './advance.js';
import {
  checkBuyerLimits,
  heldStatement,
  keyHoldings,
  takesBuyerLocks,
  type Buyer,
  type Holding,
  type HostLoad,
} from './buyer-limits.js';
import { ClaimConflict, ExtensionInFlight, PaymentIdTaken, UpgradeInFlight } from './claim-conflicts.js';
import { crashPoint, pausePoint } from './crash-point.js';
import { checkExtensible, priceExtension } from './extension-price.js';
import type { OrderRequest } from './order-price.js';
import { placeMessages as m } from './place-messages.js';
import { PriceMemo } from './price-memo.js';
import { RecentCount } from './recent-count.js';
import {
  auditEntryOf,
  newOrderOf,
  storedPayment,
  type Attempt,
  type Offer,
  type PlaceOrder,
  type Sale,
  type VerifiedPayment,
} from './sale.js';
import { priceUpgrade } from './upgrade-price.js';
import {
  IN_FLIGHT_ORDERS_SQL,
  type ClaimLocks,
  type InFlightOrder,
  type OrderRow,
  type OrderStore,
} from './order-store.js';
import { serviceLimitsOf, streamLoadOf } from './service-limits.js';

/** How much later than now + maxTimeoutSeconds an authorization may expire: clocks of payer and service differ. */
export const VALID_BEFORE_SLACK_SECONDS = 30;
const REORG_MARGIN_BLOCKS = 5n;

export type { PlaceOrder };

export interface PlacedOrder {
  body: { ok: true; order: Record<string, unknown>; service: unknown; idempotent_replay: boolean };
  paymentResponse: string;
}

/** A 409 the agent resolves by sending the same request again in a second. */
function retryNow() {
  return { retryable: true, retryAfterSeconds: 1 };
}

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
  leaseSeconds: number;
  /** Places new streams on the pool's hosts; without it (no streaming) nothing is counted. */
  placement?: HostPlacement;
  /** How long a repeat waits for the first request with the same key before answering 409 idempotency_in_progress. */
  waitForInFlightMs: number;
  /** Refuses payments that cannot be valid before the facilitator (and the chain) is asked. */
  precheck?: PaymentPrecheck;
  /** A paid order not provisioned by then is refunded in full (src/refunds): what a 503 provisioning_pending says. */
  refundAfterMs?: number;
}

/** POST /orders: price → 402, or verify → claim the key → settle → provision → 200. */
export class OrderService {
  /** The pool as read at most a second ago, for the check before payment. */
  private readonly recentPool = new RecentCount<PoolHost[]>();
  private readonly prices = new PriceMemo();
  /** What each API key held lately, for the buyer limits before payment (see checkBuyerBeforePayment). */
  private readonly recentKeyHoldings = new Map<string, RecentCount<Holding>>();
  /** Passed buyer-limit checks before payment, by key, payer and demand, with the counts they read. */
  private readonly recentPasses = new Map<
    string,
    { at: number; snapshot: Snapshot; held?: Promise<Holding>; host?: HostLoad; check: Promise<void> }
  >();

  constructor(
    private readonly db: Database,
    private readonly live: LiveSnapshot,
    private readonly audit: AuditLog,
    private readonly orders: OrderStore,
    private readonly services: ServiceRecords,
    private readonly gateway: PaymentGateway,
    private readonly deps: AdvanceDeps,
    private readonly options: OrderServiceOptions,
  ) {}

  async place(input: PlaceOrder): Promise<PlacedOrder> {
    const attempt = await this.replayOf(input);
    if ('placed' in attempt) return attempt.placed;
    const sale = await this.priceSale(attempt);
    await this.admitBeforePayment(attempt, sale);
    const offer = await this.offerFor(attempt, sale);
    const sent = await this.acceptPayment(attempt, sale, offer);
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
   * the authorization was spent. Otherwise the attempt to go on with.
   */
  private async replayOf(input: PlaceOrder): Promise<Attempt | Replayed> {
    const requestHash = sha256(canonicalJson(input.request));
    const sent = input.paymentSignature ? this.gateway.decode(input.paymentSignature) : undefined;
    const signed = sent && { payer: sent.payer, nonce: sent.reference };
    const found = await this.orders.lookUp(input.apiKeyId, input.idempotencyKey, signed);
    if (found.order) return { placed: await this.repeat(found.order, requestHash, input.resourceUrl) };
    const paymentId = sent && this.paymentIdOf(sent.payload);
    const attempt = { ...input, requestHash, sent, paymentId, authorizationUsedBy: found.authorizationUsedBy };
    if (!paymentId) return attempt;
    const paidWithId = await this.orders.byPaymentId(input.apiKeyId, paymentId);
    if (!paidWithId) return attempt;
    return { placed: await this.samePayment(paidWithId, requestHash, sent.payload, input.resourceUrl) };
  }

  /** The price of an order, an upgrade or an extension, and what it will add to this instance's Icecast. */
  private async priceSale(attempt: Attempt): Promise<Sale> {
    const { request, extensionOf, upgradeOf } = attempt;
    const snapshot = this.live.current;
    const extension =
      extensionOf && 'extension_of' in request
        ? await priceExtension(snapshot, extensionOf, request.duration_hours)
        : undefined;
    const upgrade =
      upgradeOf && 'upgrade_of' in request
        ? await priceUpgrade(snapshot, upgradeOf, request.product_id, this.db)
        : undefined;
    const { priced, amountAtomic, quoteId } =
      extension ?? upgrade ?? (await this.prices.price(snapshot, request as OrderRequest, attempt.apiKeyId, this.db));
    const billing = 'billing' in request ? request.billing : 'one_time';
    // An extension's order carries its own hours only; the service keeps its limits.
    const configuration = extension ? { duration_hours: extension.input.extend_hours } : priced.output.configuration;
    const demand = extensionOf
      ? revivalLoadOf(extensionOf)
      : streamLoadOf(serviceLimitsOf(priced.product, configuration), upgradeOf);
    return { snapshot, priced, amountAtomic, quoteId, billing, configuration, demand, extension, upgrade };
  }

  /** Refuses, before asking for money, a sale that does not fit on the Icecast or within the buyer's limits. */
  private async admitBeforePayment(attempt: Attempt, sale: Sale): Promise<void> {
    const host = await this.admit(attempt, sale.demand);
    const buyer = { apiKeyId: attempt.apiKeyId, payer: attempt.sent?.payer };
    await this.checkBuyerBeforePayment(sale.snapshot, buyer, sale.demand, host);
  }

  /** The payment requirements for the sale, and its 402 answers: each carries them in PAYMENT-REQUIRED. */
  private async offerFor(attempt: Attempt, sale: Sale): Promise<Offer> {
    const { amountAtomic, extension, priced } = sale;
    const requirements = await this.gateway.requirements(amountAtomic);
    const hours = extension ? `${extension.input.extend_hours} more hours of ` : '';
    const resource = {
      url: attempt.resourceUrl,
      description: `${hours}${priced.product.name} (${priced.product.id}) for ${atomicToAmount(amountAtomic, 6)} USDC`,
      ...(attempt.discovery && { serviceName: attempt.discovery.serviceName, tags: attempt.discovery.tags }),
    };
    const declaration = attempt.discovery?.declaration;
    const paymentRequired = async (code: string, message: string, status = 402) => {
      const header = await this.gateway.paymentRequiredHeader(requirements, resource, message, declaration);
      return new ApiError(status, code, message, { paymentRequired: header });
    };
    return { requirements, paymentRequired };
  }

  /**
   * The payment sent, if it can pay for this sale: a payload for exactly these terms and this operation, valid no
   * longer than the service accepts, not used yet (or used by this very request: its order) and not refused by the
   * precheck. Without one, the 402 that says what to pay.
   */
  private async acceptPayment(attempt: Attempt, sale: Sale, offer: Offer): Promise<SentPayment | Replayed> {
    const { requirements, paymentRequired } = offer;
    if (!attempt.paymentSignature) throw await paymentRequired('payment_required', m.payFirst(sale.amountAtomic));
    if (!attempt.sent) throw await paymentRequired('payment_invalid', m.notAPayment);
    const { payload, validUntil } = attempt.sent;
    if (!this.gateway.matches(requirements, payload)) {
      throw await paymentRequired('payment_mismatch', m.otherTerms(sale.amountAtomic, requirements));
    }
    // The signature covers only the transfer: without this, a payment made out for one operation (an order) would
    // buy any other of the same price (an upgrade, an MCP order) while the payer's client showed the first. The
    // operation is bound, not the address it was asked at: another instance, or this one on a new port, sells it too.
    if (operationOf(payload.resource?.url) !== operationOf(attempt.resourceUrl)) {
      const message = m.wrongResource(payload.resource?.url, attempt.resourceUrl);
      throw await paymentRequired('payment_wrong_resource', message);
    }
    const { maxTimeoutSeconds } = requirements;
    const latestAccepted = BigInt(Math.floor(Date.now() / 1000) + maxTimeoutSeconds + VALID_BEFORE_SLACK_SECONDS);
    if (BigInt(validUntil) > latestAccepted) {
      throw await paymentRequired(
        'payment_rejected',
        m.validTooLong(validUntil, maxTimeoutSeconds, VALID_BEFORE_SLACK_SECONDS, latestAccepted),
      );
    }
    // Looked up with the key (replayOf); the claim's unique (payer, nonce) is what finally keeps it from paying twice.
    const usedBy = attempt.authorizationUsedBy && (await this.orders.byId(attempt.authorizationUsedBy));
    if (usedBy) return { placed: await this.paidBy(usedBy, attempt, offer) };
    const refusal = await this.options.precheck?.refusal(requirements, payload);
    if (refusal) throw await paymentRequired('payment_rejected', m.cannotBeValid(refusal));
    return attempt.sent;
  }

  /**
   * The facilitator's verification, and a height of the chain before the payment can be used (read at most a second
   * ago: earlier is as good): its proof will be searched from there (a few blocks earlier, for reorgs).
   */
  private async verifyPayment(attempt: Attempt, offer: Offer, sent: SentPayment): Promise<VerifiedPayment | Replayed> {
    const { payload } = sent;
    const [verification, heightAtVerify] = await Promise.all([
      this.gateway.verify(payload, offer.requirements),
      this.deps.ledger.recentBlock().catch((e: unknown) => e as Error),
    ]);
    if (!verification.isValid) {
      // A concurrent identical request may have claimed the key and spent this authorization meanwhile.
      const claimedMeanwhile = await this.orders.byAuthorization(sent.payer, sent.reference);
      if (claimedMeanwhile) return { placed: await this.paidBy(claimedMeanwhile, attempt, offer) };
      // The facilitator reports an unreachable chain as an invalid payment: tell the agent to retry instead.
      await this.deps.ledger.latestBlock().catch((e) => {
        throw PaymentGateway.unavailable(e);
      });
      throw await offer.paymentRequired('payment_rejected', m.refused(verification));
    }
    if (heightAtVerify instanceof Error) throw PaymentGateway.unavailable(heightAtVerify);
    const claimBlock = heightAtVerify > REORG_MARGIN_BLOCKS ? heightAtVerify - REORG_MARGIN_BLOCKS : 0n;
    return { ...sent, claimBlock };
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
    await this.audit.saveSnapshot(sale.snapshot);
    const entry = auditEntryOf(attempt, sale);
    const order = newOrderOf(attempt, sale, offer, payment, entry.id);
    let claimed: OrderRow | undefined;
    const locks = this.claimLocks(attempt, sale, payment.payer);
    try {
      claimed = await this.orders.claim(
        order,
        entry,
        this.options.leaseSeconds,
        (client) => this.stillFits(client, attempt, sale, payment.payer, locks),
        locks,
      );
    } catch (e) {
      // Refused at claim although the counts before payment let it through: they are read again.
      this.forgetRecentCounts();
      return { placed: await this.claimRefused(e, attempt, payment) };
    }
    // This instance's own sale is seen at once; other instances' within a second.
    if (claimed && !attempt.upgradeOf && !attempt.extensionOf) this.countSale(claimed, sale.demand);
    else this.forgetRecentCounts();
    if (claimed) return { order: claimed, evaluationHash: entry.hash };
    const winner = await this.orders.byKey(attempt.apiKeyId, attempt.idempotencyKey);
    if (winner) return { placed: await this.repeat(winner, attempt.requestHash, attempt.resourceUrl) };
    throw new ApiError(409, 'idempotency_in_progress', m.keyReleased, retryNow());
  }

  /**
   * The locks a new stream's claim takes with its key's check, in one statement (an upgrade or an extension locks its
   * service first, then these, in stillFits).
   */
  private claimLocks(attempt: Attempt, sale: Sale, payer: string): ClaimLocks {
    if (attempt.upgradeOf || attempt.extensionOf) return {};
    return {
      placement: this.placesStreams(sale.demand),
      ...(takesBuyerLocks(sale.snapshot, sale.demand) && { buyer: { payer: payer.toLowerCase() } }),
    };
  }

  /**
   * The checks before payment, again and exactly, under the locks of the claim. The payer's limit is checked here,
   * once the facilitator vouched for `from`: a forged `from` must not learn what another address holds.
   */
  private async stillFits(
    client: Client,
    attempt: Attempt,
    sale: Sale,
    payer: string,
    locked: ClaimLocks,
  ): Promise<{ host_id: string | null }> {
    if (attempt.upgradeOf) await this.upgradeStillFits(client, attempt.upgradeOf);
    if (attempt.extensionOf) await this.extensionStillFits(client, attempt.extensionOf);
    const buyer = { apiKeyId: attempt.apiKeyId, payer };
    const { host, held } = await this.admitWithHoldings(client, attempt, sale, payer, locked);
    const check = { client, host, locked: !!locked.buyer, held };
    await checkBuyerLimits(this.db, sale.snapshot, buyer, sale.demand, check);
    return { host_id: host?.id ?? ownHostOf(attempt) ?? null };
  }

  /**
   * admit() under the claim's locks; a new stream on the pool with both locks taken reads the buyer's holdings in the
   * same statement as the pool (both after the locks: one round trip less while every claim queues on them).
   */
  private async admitWithHoldings(
    client: Client,
    attempt: Attempt,
    sale: Sale,
    payer: string,
    locked: ClaimLocks,
  ): Promise<{ host?: PoolHost; held?: Row[] }> {
    const placement = this.options.placement;
    if (!placement || !locked.placement || !locked.buyer || ownHostOf(attempt)) {
      return { host: await this.admit(attempt, sale.demand, client, locked.placement) };
    }
    const read = await placement.poolWith(client, heldStatement(attempt.apiKeyId, payer, 2));
    return { host: placement.choose(read.hosts, sale.demand), held: read.beside };
  }

  /** Why the claim failed, as the agent reads it; the order already paid with this payment-identifier is a replay. */
  private async claimRefused(e: unknown, attempt: Attempt, payment: SentPayment): Promise<PlacedOrder> {
    const retryLater = { retryable: true, retryAfterSeconds: 2 };
    if (e instanceof UpgradeInFlight) throw new ApiError(409, 'upgrade_in_progress', m.upgradeInProgress, retryLater);
    if (e instanceof ExtensionInFlight) {
      throw new ApiError(409, 'extension_in_progress', m.extensionInProgress, retryLater);
    }
    if (e instanceof PaymentIdTaken && attempt.paymentId) {
      const paidWithId = await this.orders.byPaymentId(attempt.apiKeyId, attempt.paymentId);
      if (paidWithId) return this.samePayment(paidWithId, attempt.requestHash, payment.payload, attempt.resourceUrl);
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
      const done = await advance(claimed, this.deps, 'request');
      crashPoint('after_provision');
      return await this.respond(done.order, false, attempt.resourceUrl, done.service, evaluationHash);
    } catch (e) {
      // Counted as sold (countSale); what it holds now is read again.
      this.forgetRecentCounts();
      throw await this.notDelivered(e, claimed, offer);
    }
  }

  /**
   * A new stream this instance just claimed, added to the counts the next checks before payment read (at most a second
   * old): the next buyer's 402 needs no new read of the pool and of the key's holdings. An upgrade or an extension,
   * and an order not delivered, make them read afresh instead.
   */
  private countSale(order: OrderRow, demand: StreamLoad): void {
    this.recentPool.add((hosts) =>
      hosts.map((h) => (h.id === order.host_id ? { ...h, load: addLoad(h.load, demand) } : h)),
    );
    this.recentKeyHoldings.get(order.api_key_id)?.add((held) => ({
      ...held,
      live_services: held.live_services + demand.sources,
      listener_places: held.listener_places + demand.listeners,
    }));
  }

  private forgetRecentCounts(): void {
    this.recentPool.forget();
    this.recentKeyHoldings.clear();
    this.recentPasses.clear();
  }

  /** Why a claimed order was not delivered, as the agent reads it. */
  private async notDelivered(e: unknown, claimed: OrderRow, offer: Offer): Promise<unknown> {
    if (e instanceof PaymentNotTaken) {
      return offer.paymentRequired('payment_failed', m.notTaken(`${e.reason}: ${e.message}`));
    }
    if (e instanceof ServiceStopped) {
      return new ApiError(409, 'service_stopped', m.serviceStopped, { details: [{ order_id: claimed.id }] });
    }
    if (e instanceof SettlementPending) {
      return new ApiError(503, 'settlement_pending', m.settlementPending(claimed.id, e.message, e.validBefore), {
        retryable: true,
        retryAfterSeconds: 5,
        details: [{ order_id: claimed.id }],
      });
    }
    return (await this.paidNotProvisioned(claimed.id)) ?? e;
  }

  /**
   * The payment was taken but provisioning failed: the order stays provisioning, retried, else refunded in full (maybe
   * already, by another instance's worker or recovery while this request waited).
   */
  private async paidNotProvisioned(orderId: string): Promise<ApiError | undefined> {
    const order = await this.orders.byId(orderId).catch(() => undefined);
    if (order?.state === 'refunded') return refundedError(order);
    if (order?.state !== 'provisioning') return undefined;
    const after = this.options.refundAfterMs;
    const bound = after === undefined ? '' : ` within ${Math.round(after / 1000)} s`;
    return new ApiError(
      503,
      'provisioning_pending',
      `The payment was taken (order ${order.id}) but the service could not be provisioned yet; it is retried ` +
        'automatically. Retry this same request with the same Idempotency-Key in a few seconds to get the service; ' +
        `you will not be charged twice. If it cannot be provisioned${bound}, everything it paid is refunded ` +
        `automatically: GET /orders/${order.id} shows the refund.`,
      { retryable: true, retryAfterSeconds: 5, details: [{ order_id: order.id }] },
    );
  }

  /**
   * An upgrade was priced on the service as it was then; under the service's row lock at claim time it must still be
   * that service, so that parallel upgrades cannot each be charged for the same change.
   */
  private async upgradeStillFits(client: Client, priced: ServiceRow): Promise<void> {
    const {
      rows: [now],
    } = await client.query('SELECT product_id, limits, status FROM services WHERE id = $1 FOR UPDATE', [priced.id]);
    if (
      !now ||
      now.product_id !== priced.product_id ||
      canonicalJson(now.limits) !== canonicalJson(priced.limits) ||
      now.status !== priced.status
    ) {
      throw new ApiError(
        409,
        'service_changed',
        'The service changed while this upgrade was being paid (another upgrade or a status change); nothing was charged. Read the service (GET /services/{service_id}) and ask for the upgrade again if it still needs one.',
      );
    }
    await refuseWhileOtherPaid(client, priced.id, 'extension');
  }

  /**
   * An extension was priced on the product, limits and hours the service had then; under the service's row lock at
   * claim time it must still have them, and must still be extensible: a stop (with its refund) that got there first
   * refuses it here, before any money moves, and a stop that comes later waits for this order's lock and sees it. An
   * upgrade claimed but not applied yet would change the product under it: refused too (see refuseWhileOtherPaid).
   */
  private async extensionStillFits(client: Client, priced: ServiceRow): Promise<void> {
    const {
      rows: [now],
    } = await client.query(
      'SELECT product_id, limits, status, expires_at, stopped_at FROM services WHERE id = $1 FOR UPDATE',
      [priced.id],
    );
    if (now) checkExtensible(this.live.current, now);
    if (!now || now.product_id !== priced.product_id || canonicalJson(now.limits) !== canonicalJson(priced.limits)) {
      throw new ApiError(
        409,
        'service_changed',
        'The service changed while this extension was being paid (another extension or an upgrade); nothing was charged. Read the service (GET /services/{service_id}) and extend again if it still needs more time.',
      );
    }
    await refuseWhileOtherPaid(client, priced.id, 'upgrade');
  }

  /**
   * Never sells a stream that does not fit on a host: a new stream goes to a live host with room (HostPlacement), an
   * upgrade or a revival stays on its service's host. Checked before asking for money (against a count at most a
   * second old), and exactly when the key is claimed, under the placement lock, so that two buyers of the last place
   * anywhere cannot both pay for it. The host it fits on, with its limits and load, for the capacity reserve.
   */
  /** Whether a sale of this demand is placed on a host (and checked under the placement lock at claim). */
  private placesStreams(demand: StreamLoad): boolean {
    return !!this.options.placement && (demand.sources > 0 || demand.listeners > 0);
  }

  private async admit(
    attempt: Attempt,
    demand: StreamLoad,
    client?: Client,
    placementLocked = false,
  ): Promise<PoolHost | undefined> {
    const placement = this.options.placement;
    if (!placement || !this.placesStreams(demand)) return undefined;
    if (client && !placementLocked) await placement.lock(client);
    const own = ownHostOf(attempt);
    if (own) {
      const host = await placement.host(own, client);
      if (host) placement.admitOn(host, demand);
      return host;
    }
    if (client) return placement.choose(await placement.pool(client), demand);
    try {
      return placement.choose(await this.recentHosts(placement), demand);
    } catch {
      // Never refused on a recent count (its next expiry, for Retry-After, may be older than the sales added).
      this.recentPool.forget();
      return placement.choose(await this.recentHosts(placement), demand);
    }
  }

  /** The pool as read at most a second ago (this instance's own claims added, see countSale). */
  private recentHosts(placement: HostPlacement): Promise<PoolHost[]> {
    return this.recentPool.get(() => placement.pool());
  }

  /**
   * The buyer limits for the key before payment is asked, on what the key held at most a second ago, on the same
   * snapshot (this instance's own sales added, see countSale; other instances' show within a second). A pass is reused
   * while those counts and the host's are the same objects; a refusal is never made on them: they are read again
   * first. The limits are checked again, exactly and under locks, when the paid order is claimed.
   */
  private checkBuyerBeforePayment(
    snapshot: Snapshot,
    buyer: Buyer,
    demand: StreamLoad,
    host?: HostLoad,
  ): Promise<void> {
    const counted = snapshot.catalog.settings.buyer_limits && (demand.sources > 0 || demand.listeners > 0);
    const held = counted ? this.recentHoldingsOf(snapshot, buyer.apiKeyId) : undefined;
    const key = `${buyer.apiKeyId}\n${buyer.payer ?? ''}\n${demand.sources}\n${demand.listeners}`;
    const recent = this.recentPasses.get(key);
    const same = recent && recent.snapshot === snapshot && recent.held === held && recent.host === host;
    if (same && Date.now() - recent.at <= 1000) return recent.check;
    if (this.recentPasses.size >= 10_000) this.recentPasses.clear();
    const check = this.checkOnRecentCounts(snapshot, buyer, demand, host, held);
    const entry = { at: Date.now(), snapshot, held, host, check };
    this.recentPasses.set(key, entry);
    check.catch(() => {
      if (this.recentPasses.get(key) === entry) this.recentPasses.delete(key);
    });
    return check;
  }

  private async checkOnRecentCounts(
    snapshot: Snapshot,
    buyer: Buyer,
    demand: StreamLoad,
    host: HostLoad | undefined,
    held: Promise<Holding> | undefined,
  ): Promise<void> {
    try {
      await checkBuyerLimits(this.db, snapshot, buyer, demand, { host, ...(held && { keyHeld: () => held }) });
    } catch {
      this.recentKeyHoldings.delete(buyer.apiKeyId);
      await checkBuyerLimits(this.db, snapshot, buyer, demand, { host });
    }
  }

  private recentHoldingsOf(snapshot: Snapshot, apiKeyId: string): Promise<Holding> {
    let recent = this.recentKeyHoldings.get(apiKeyId);
    if (!recent) {
      if (this.recentKeyHoldings.size >= 10_000) this.recentKeyHoldings.clear();
      recent = new RecentCount<Holding>();
      this.recentKeyHoldings.set(apiKeyId, recent);
    }
    return recent.get(() => keyHoldings(this.db, snapshot, apiKeyId), snapshot);
  }

  async get(apiKeyId: string, orderId: string): Promise<Record<string, unknown> | undefined> {
    const order = await this.orders.byId(orderId);
    if (!order || order.api_key_id !== apiKeyId) return undefined;
    const target = order.upgrade_of ?? order.extension_of;
    const service = target ? await this.services.byId(target) : await this.services.forOrder(order.id);
    return { order: orderDocument(order), service: service ? this.services.document(service) : null };
  }

  /** What priced a service: the evaluation of its order, or of its latest paid upgrade, and all of them in order. */
  async pricedBy(
    service: ServiceRow,
  ): Promise<{ evaluation_id: string | null; evaluations: Array<{ order_id: string; evaluation_id: string | null }> }> {
    const evaluations = await this.orders.evaluationsOf(service);
    return { evaluation_id: evaluations.at(-1)?.evaluation_id ?? null, evaluations };
  }

  /** The authorization already pays for an order: this request's own (a concurrent retry) or another one. */
  private async paidBy(order: OrderRow, attempt: Attempt, offer: Offer): Promise<PlacedOrder> {
    if (order.state === 'failed') {
      throw await offer.paymentRequired('payment_failed', m.notTaken(order.failure ?? 'settlement_failed'));
    }
    if (order.api_key_id === attempt.apiKeyId && order.idempotency_key === attempt.idempotencyKey) {
      return this.repeat(order, attempt.requestHash, attempt.resourceUrl);
    }
    throw new ApiError(409, 'payment_already_used', m.paymentAlreadyUsed);
  }

  /** The payment-identifier of a payload; a malformed one is refused before anything else happens. */
  private paymentIdOf(payload: PaymentPayload): string | undefined {
    const found = this.gateway.paymentId(payload);
    if (found && 'invalid' in found) {
      throw new ApiError(400, 'payment_id_invalid', m.paymentIdInvalid(found.invalid));
    }
    return found?.id;
  }

  /**
   * A payment-identifier already bound to an order of this API key: the very same payload for the same request is a
   * resend (whatever its Idempotency-Key) and gets that order; anything else under that id is refused.
   */
  private async samePayment(
    order: OrderRow,
    requestHash: string,
    payload: PaymentPayload,
    resourceUrl: string,
  ): Promise<PlacedOrder> {
    if (order.request_hash !== requestHash || canonicalJson(order.payment) !== canonicalJson(storedPayment(payload))) {
      throw new ApiError(409, 'payment_id_conflict', m.paymentIdConflict(order));
    }
    return this.repeat(order, requestHash, resourceUrl);
  }

  /** A request with a key that is already bound: same body → the same order (possibly after waiting), other body → 409. */
  private async repeat(existing: OrderRow, requestHash: string, resourceUrl: string): Promise<PlacedOrder> {
    if (existing.request_hash !== requestHash) {
      throw new ApiError(409, 'idempotency_key_reused', m.keyReused);
    }
    const deadline = Date.now() + this.options.waitForInFlightMs;
    let order: OrderRow | undefined = existing;
    while (order && order.state !== 'active' && order.state !== 'refunded' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      order = await this.orders.byId(existing.id);
    }
    if (order?.state === 'active') return this.respond(order, true, resourceUrl);
    if (order?.state === 'refunded') throw refundedError(order);
    if (order?.state === 'failed') {
      throw new ApiError(409, 'idempotency_in_progress', m.earlierAttemptFailed, retryNow());
    }
    throw new ApiError(409, 'idempotency_in_progress', m.stillInProgress, retryNow());
  }

  private async respond(
    order: OrderRow,
    replay: boolean,
    resourceUrl: string,
    provisioned?: ServiceRow,
    /** The evaluation record's hash when this request just appended it: no need to read it back. */
    evaluationHash?: string,
  ): Promise<PlacedOrder> {
    const readHash = this.gateway.receipts && order.evaluation_id && !evaluationHash;
    const [service, evaluation] = await Promise.all([
      provisioned ??
        ((order.upgrade_of ?? order.extension_of)
          ? this.services.byId((order.upgrade_of ?? order.extension_of)!)
          : this.services.forOrder(order.id)),
      readHash ? this.audit.get(order.evaluation_id!) : undefined,
    ]);
    if (order.state !== 'active' || !service) throw new Error(`order ${order.id} is ${order.state} without a service`);
    const settlement = settlementOf(order);
    const extensions = await this.gateway.receipts?.receipt({
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
      body: {
        ok: true,
        order: orderDocument(order),
        service: this.services.document(service),
        idempotent_replay: replay,
      },
      paymentResponse: PaymentGateway.responseHeader({ ...settlement, ...(extensions && { extensions }) }),
    };
  }
}

/**
 * An upgrade and an extension of one service are each priced on the service as it is (the extension at its product's
 * rates, the upgrade for its remaining hours), but change it only once paid and provisioned. Claimed while the other
 * kind is in flight (claimed, not yet applied), each would be applied over the other's change: 40 hours extended at the
 * old product's rate, then upgraded to a dearer one for the hours it had before. So the second claim is refused,
 * before any money moves. Run after the service's row lock (taken by both claims, by settlement and by provisioning):
 * an order of the other kind is then either still in flight here, or applied (and the service row changed with it).
 */
async function refuseWhileOtherPaid(client: Client, serviceId: string, other: 'upgrade' | 'extension'): Promise<void> {
  const column = other === 'upgrade' ? 'upgrade_of' : 'extension_of';
  const { rows } = await client.query(
    `SELECT id FROM orders WHERE ${column} = $1 AND state IN ('settling', 'provisioning') LIMIT 1`,
    [serviceId],
  );
  if (!rows.length) return;
  const self = other === 'upgrade' ? 'extension' : 'upgrade';
  const again = other === 'upgrade' ? 'extend it again' : 'ask for the upgrade again';
  throw new ApiError(
    409,
    `${other}_in_progress`,
    `An ${other} of this service (order ${rows[0].id}) is being paid right now, and this ${self} was priced on the service as it was before it; nothing was charged for this one. Read the service (GET /services/{service_id}) in a few seconds and ${again} if it still needs it: it is priced then on the service as it has become.`,
    { retryable: true, retryAfterSeconds: 2, details: [{ order_id: rows[0].id }] },
  );
}

function refundedError(order: OrderRow): ApiError {
  return new ApiError(
    409,
    'order_refunded',
    `This order was paid but could not be delivered (${order.failure ?? 'not provisioned'}); everything it paid is ` +
      `refunded. GET /orders/${order.id} shows the refund and its transaction. Order again with a new Idempotency-Key ` +
      'if you still need the service.',
    { details: [{ order_id: order.id }] },
  );
}

function addLoad(load: StreamLoad, demand: StreamLoad): StreamLoad {
  return { sources: load.sources + demand.sources, listeners: load.listeners + demand.listeners };
}

/** The host of the service an upgrade or extension changes: it stays there. */
function ownHostOf(attempt: Attempt): string | undefined {
  return (attempt.upgradeOf ?? attempt.extensionOf)?.host_id ?? undefined;
}

/** An extension brings an expired service back on its Icecast (a stream again); otherwise it adds nothing there. */
function revivalLoadOf(service: ServiceRow): StreamLoad {
  return service.status === 'expired' ? streamLoadOf(service.limits) : { sources: 0, listeners: 0 };
}

function settlementOf(order: OrderRow): SettleResponse {
  const s = order.settlement as Partial<SettleResponse> | null;
  return {
    success: true,
    transaction: s?.transaction ?? '',
    network: (s?.network ?? order.network) as SettleResponse['network'],
    payer: s?.payer ?? order.payer,
  };
}

function orderDocument(order: OrderRow): Record<string, unknown> {
  return {
    id: order.id,
    status: order.state,
    product_id: order.product_id,
    billing: order.billing,
    configuration: order.configuration,
    amount: {
      amount: atomicToAmount(order.amount_atomic, 6),
      amount_atomic: order.amount_atomic,
      currency: 'USDC',
      decimals: 6,
    },
    quote_id: order.quote_id,
    evaluation_id: order.evaluation_id,
    ...(order.upgrade_of && { upgrade_of: order.upgrade_of }),
    ...(order.extension_of && { extension_of: order.extension_of }),
    payment: {
      protocol: 'x402',
      network: order.network,
      payer: order.payer,
      transaction: (order.settlement as { transaction?: string } | null)?.transaction ?? null,
      block_number: (order.settlement as { proof?: { block_number?: string } } | null)?.proof?.block_number ?? null,
    },
    failure: order.failure,
    created_at: order.created_at.toISOString(),
    settled_at: order.settled_at?.toISOString() ?? null,
  };
}

/** What a resource URL names, whatever instance it was asked at: the path of an http(s) URL, any other URL whole. */
function operationOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const parsed = new URL(url);
    return /^https?:$/.test(parsed.protocol) ? `${parsed.pathname}${parsed.search}` : url;
  } catch {
    return url;
  }
}
