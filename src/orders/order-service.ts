import { canonicalJson, extensionRecord, priceRecord, sha256, upgradeRecord, type AuditLog } from '../audit/index.js';
import { randomId } from '../ids/index.js';
import { ApiError } from '../errors/index.js';
import { PaymentGateway, type DiscoveryDeclaration, type PaymentPrecheck, type PaymentPayload, type SettleResponse } from '../payments/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { Snapshot } from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { ServiceStopped, type ServiceRecords, type ServiceRow, type StreamCapacity, type StreamLoad } from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import { advance, PaymentNotTaken, SettlementPending, type AdvanceDeps } from './advance.js';
import { checkBuyerLimits, type Buyer, type HostLoad } from './buyer-limits.js';
import { crashPoint, pausePoint } from './crash-point.js';
import { checkExtensible, priceExtension } from './extension-price.js';
import type { OrderRequest } from './order-price.js';
import { PriceMemo } from './price-memo.js';
import { priceUpgrade } from './upgrade-price.js';
import type { OrderRow, OrderStore } from './order-store.js';
import { serviceLimitsOf, streamLoadOf } from './service-limits.js';

/** How much later than now + maxTimeoutSeconds an authorization may expire: clocks of payer and service differ. */
export const VALID_BEFORE_SLACK_SECONDS = 30;
const REORG_MARGIN_BLOCKS = 5n;

type PaymentRequiredError = (code: string, message: string, status?: number) => Promise<ApiError>;

export interface PlaceOrder {
  apiKeyId: string;
  idempotencyKey: string;
  /** The order request, for an upgrade { upgrade_of, product_id }, for an extension { extension_of, duration_hours }. */
  request: OrderRequest | { upgrade_of: string; product_id: string } | { extension_of: string; duration_hours: number };
  /** The service an upgrade applies to. */
  upgradeOf?: ServiceRow;
  /** The service an extension adds paid time to. */
  extensionOf?: ServiceRow;
  paymentSignature?: string;
  resourceUrl: string;
  /** How the 402 describes this operation to discovery (x402 bazaar): its declaration, service name and tags. */
  discovery?: { declaration: DiscoveryDeclaration; serviceName: string; tags: string[] };
}

/** The official x402 client refuses to pay more than this (atomic USDC) unless its spend controls are raised. */
const CLIENT_DEFAULT_CAP_ATOMIC = 1_000_000n;

export interface PlacedOrder {
  body: { ok: true; order: Record<string, unknown>; service: unknown; idempotent_replay: boolean };
  paymentResponse: string;
}

export interface OrderServiceOptions {
  leaseSeconds: number;
  /** The Icecast this instance provisions on; without it (no streaming) nothing is counted. */
  capacity?: StreamCapacity;
  /** How long a repeat waits for the first request with the same key before answering 409 idempotency_in_progress. */
  waitForInFlightMs: number;
  /** Refuses payments that cannot be valid before the facilitator (and the chain) is asked. */
  precheck?: PaymentPrecheck;
  /** A paid order not provisioned by then is refunded in full (src/refunds): what a 503 provisioning_pending says. */
  refundAfterMs?: number;
}

/** POST /orders: price → 402, or verify → claim the key → settle → provision → 200. */
export class OrderService {
  private recentLoad?: { at: number; load: Promise<StreamLoad> };
  private readonly prices = new PriceMemo();
  /** Passed buyer-limit checks before payment, by key and demand (see checkBuyerBeforePayment). */
  private readonly recentBuyerChecks = new Map<string, { at: number; snapshot: Snapshot; check: Promise<void> }>();

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
    const requestHash = sha256(canonicalJson(input.request));
    const existing = await this.orders.byKey(input.apiKeyId, input.idempotencyKey);
    if (existing) return this.repeat(existing, requestHash, input.resourceUrl);
    // Looked up before pricing and verification: a resend of a paid payload must find its order even after the price
    // changed or the authorization was spent.
    const sent = input.paymentSignature ? this.gateway.decode(input.paymentSignature) : undefined;
    const paymentId = sent && this.paymentIdOf(sent.payload);
    if (paymentId) {
      const paidWithId = await this.orders.byPaymentId(input.apiKeyId, paymentId);
      if (paidWithId) return this.samePayment(paidWithId, requestHash, sent.payload, input.resourceUrl);
    }

    const snapshot = this.live.current;
    const extension = input.extensionOf && 'extension_of' in input.request
      ? await priceExtension(snapshot, input.extensionOf, input.request.duration_hours) : undefined;
    const upgrade = input.upgradeOf && 'upgrade_of' in input.request ? await priceUpgrade(snapshot, input.upgradeOf, input.request.product_id, this.db) : undefined;
    const { priced, amountAtomic, quoteId } = extension ?? upgrade ?? await this.prices.price(snapshot, input.request as OrderRequest, input.apiKeyId, this.db);
    const billing = 'billing' in input.request ? input.request.billing : 'one_time';
    // An extension's order carries its own hours only; the service keeps its limits.
    const configuration = extension ? { duration_hours: extension.input.extend_hours } : priced.output.configuration;
    const demand = input.extensionOf ? revivalLoadOf(input.extensionOf) : streamLoadOf(serviceLimitsOf(priced.product, configuration), input.upgradeOf);
    const host = await this.admit(demand);
    const buyerBeforePayment = { apiKeyId: input.apiKeyId, payer: sent?.authorization.from };
    await this.checkBuyerBeforePayment(snapshot, buyerBeforePayment, demand, host);
    const requirements = await this.gateway.requirements(amountAtomic);
    const resource = {
      url: input.resourceUrl,
      description: `${extension ? `${extension.input.extend_hours} more hours of ` : ''}${priced.product.name} (${priced.product.id}) for ${atomicToAmount(amountAtomic, 6)} USDC`,
      ...(input.discovery && { serviceName: input.discovery.serviceName, tags: input.discovery.tags }),
    };
    const paymentRequired = async (code: string, message: string, status = 402) => {
      const header = await this.gateway.paymentRequiredHeader(requirements, resource, message, input.discovery?.declaration);
      return new ApiError(status, code, message, { headers: { 'PAYMENT-REQUIRED': header } });
    };

    if (!input.paymentSignature) {
      throw await paymentRequired('payment_required',
        `Pay ${atomicToAmount(amountAtomic, 6)} USDC (${amountAtomic} atomic units) as described in the PAYMENT-REQUIRED header, then send this same request again, with the same Idempotency-Key, adding PAYMENT-SIGNATURE. Nothing has been ordered yet.${aboveClientCap(amountAtomic)}`);
    }
    const decoded = this.gateway.decode(input.paymentSignature);
    if (!decoded) {
      throw await paymentRequired('payment_invalid', 'PAYMENT-SIGNATURE is not a Base64-encoded x402 v2 payment payload. Build it from the PAYMENT-REQUIRED header of this answer with an x402 client and retry.');
    }
    const { payload, authorization } = decoded;
    if (!this.gateway.matches(requirements, payload)) {
      throw await paymentRequired('payment_mismatch',
        `The payment accepted other terms than this request costs now (${amountAtomic} atomic USDC to ${requirements.payTo} on ${requirements.network}). Pay exactly the requirements in this PAYMENT-REQUIRED header and retry with the same Idempotency-Key.`);
    }
    // The signature covers only the transfer: without this, a payment made out for one operation (an order) would
    // buy any other of the same price (an upgrade, an MCP order) while the payer's client showed the first. The
    // operation is bound, not the address it was asked at: another instance, or this one on a new port, sells it too.
    if (operationOf(payload.resource?.url) !== operationOf(input.resourceUrl)) {
      throw await paymentRequired('payment_wrong_resource',
        `The payment was made out for ${describeResource(payload.resource?.url)}, not for ${input.resourceUrl}, the resource this request is sold as. Nothing was charged. Sign a new payment for the resource named in this PAYMENT-REQUIRED header (resource.url) and retry with the same Idempotency-Key.`);
    }
    const latestAccepted = BigInt(Math.floor(Date.now() / 1000) + requirements.maxTimeoutSeconds + VALID_BEFORE_SLACK_SECONDS);
    if (BigInt(authorization.validBefore) > latestAccepted) {
      throw await paymentRequired('payment_rejected',
        `The payment authorization is valid until ${authorization.validBefore}, later than this service accepts (now + maxTimeoutSeconds ${requirements.maxTimeoutSeconds} s + ${VALID_BEFORE_SLACK_SECONDS} s clock slack = ${latestAccepted}). Nothing was charged. Sign a new payment whose validBefore is at most now + ${requirements.maxTimeoutSeconds} seconds and retry with the same Idempotency-Key.`);
    }
    const usedBy = await this.orders.byAuthorization(authorization.from, authorization.nonce);
    if (usedBy) return this.paidBy(usedBy, input, requestHash, paymentRequired);
    const refusal = await this.options.precheck?.refusal(requirements, payload);
    if (refusal) {
      throw await paymentRequired('payment_rejected',
        `The payment cannot be valid: ${refusal}. Nothing was charged. Sign a new payment for the requirements in this PAYMENT-REQUIRED header with the wallet it names as from, and retry with the same Idempotency-Key.`);
    }
    // The chain's height before the payment can be used: its proof will be searched from there (a few blocks earlier, for reorgs).
    const [verification, heightAtVerify] = await Promise.all([
      this.gateway.verify(payload, requirements),
      this.deps.ledger.latestBlock().catch((e: unknown) => e as Error),
    ]);
    if (!verification.isValid) {
      // A concurrent identical request may have claimed the key and spent this authorization meanwhile.
      const claimedMeanwhile = await this.orders.byAuthorization(authorization.from, authorization.nonce);
      if (claimedMeanwhile) return this.paidBy(claimedMeanwhile, input, requestHash, paymentRequired);
      // The facilitator reports an unreachable chain as an invalid payment: tell the agent to retry instead.
      await this.deps.ledger.latestBlock().catch((e) => { throw PaymentGateway.unavailable(e); });
      throw await paymentRequired('payment_rejected',
        `The payment was refused (${verification.invalidReason ?? 'invalid'}${verification.invalidMessage ? `: ${verification.invalidMessage}` : ''}). Nothing was charged. Sign a new payment for the requirements in this PAYMENT-REQUIRED header and retry with the same Idempotency-Key.`);
    }

    if (heightAtVerify instanceof Error) throw PaymentGateway.unavailable(heightAtVerify);
    const claimBlock = heightAtVerify > REORG_MARGIN_BLOCKS ? heightAtVerify - REORG_MARGIN_BLOCKS : 0n;
    // The payer's limit is checked when the order is claimed below, once the facilitator vouched for `from`: a forged
    // `from` must not learn what another address holds.
    const buyer = { apiKeyId: input.apiKeyId, payer: authorization.from };

    await this.audit.saveSnapshot(snapshot);
    const evaluationId = randomId('ev_', 12);
    const record = extension
      ? extensionRecord(evaluationId, snapshot.hash, extension.input, extension.evaluation, new Date())
      : upgrade
      ? upgradeRecord(evaluationId, snapshot.hash, upgrade.input, upgrade.evaluation, new Date())
      : priceRecord(evaluationId, snapshot.hash, { product_id: (input.request as OrderRequest).product_id, parameters: (input.request as OrderRequest).parameters ?? {}, billing }, priced, new Date(), 'order_price');
    let claimed: OrderRow | undefined;
    try {
      claimed = await this.orders.claim({
        id: randomId('ra_', 18),
        api_key_id: input.apiKeyId,
        idempotency_key: input.idempotencyKey,
        request_hash: requestHash,
        product_id: priced.output.product_id,
        billing,
        request: input.request as unknown as Record<string, unknown>,
        upgrade_of: input.upgradeOf?.id ?? null,
        ...(input.extensionOf && { extension_of: input.extensionOf.id }),
        configuration,
        amount_atomic: amountAtomic,
        quote_id: quoteId ?? null,
        evaluation_id: evaluationId,
        network: requirements.network,
        asset: requirements.asset,
        pay_to: requirements.payTo,
        payer: authorization.from.toLowerCase(),
        nonce: authorization.nonce.toLowerCase(),
        valid_before: String(authorization.validBefore),
        claim_block: claimBlock.toString(),
        payment: payload as unknown as Record<string, unknown>,
        requirements: requirements as unknown as Record<string, unknown>,
        ...(paymentId && { payment_id: paymentId }),
      }, { id: evaluationId, kind: record.record.kind, snapshotHash: snapshot.hash, text: record.text, hash: record.hash }, this.options.leaseSeconds,
      async (client) => {
        if (input.upgradeOf) await this.upgradeStillFits(client, input.upgradeOf);
        if (input.extensionOf) await this.extensionStillFits(client, input.extensionOf);
        const host = await this.admit(demand, client);
        await checkBuyerLimits(this.db, snapshot, buyer, demand, { client, host });
      });
      // This instance's own sale is seen at once; other instances' within a second.
      this.recentLoad = undefined;
      this.recentBuyerChecks.clear();
    } catch (e) {
      if ((e as { code?: string; constraint?: string }).constraint === 'orders_one_upgrade_in_flight') {
        throw new ApiError(409, 'upgrade_in_progress', 'Another upgrade of this service is being paid right now; nothing was charged for this one. Read the service (GET /services/{service_id}) in a moment and ask again if it still needs an upgrade.', { retryable: true, headers: { 'Retry-After': '2' } });
      }
      if ((e as { constraint?: string }).constraint === 'orders_one_extension_in_flight') {
        throw new ApiError(409, 'extension_in_progress', 'Another extension of this service is being paid right now; nothing was charged for this one. Read the service (GET /services/{service_id}) in a moment and extend again if it still needs more time.', { retryable: true, headers: { 'Retry-After': '2' } });
      }
      if ((e as { constraint?: string }).constraint === 'orders_payment_id' && paymentId) {
        const paidWithId = await this.orders.byPaymentId(input.apiKeyId, paymentId);
        if (paidWithId) return this.samePayment(paidWithId, requestHash, payload, input.resourceUrl);
      }
      if ((e as { code?: string }).code === '23505') {
        throw new ApiError(409, 'payment_already_used', 'This payment authorization already paid for another order. Sign a new payment (new nonce) for this request.');
      }
      throw e;
    }
    if (!claimed) {
      const winner = await this.orders.byKey(input.apiKeyId, input.idempotencyKey);
      if (winner) return this.repeat(winner, requestHash, input.resourceUrl);
      throw new ApiError(409, 'idempotency_in_progress', 'Another request with this Idempotency-Key just finished without charging. Retry this same request.', { retryable: true, headers: { 'Retry-After': '1' } });
    }

    crashPoint('after_claim');
    await pausePoint('after_claim');
    try {
      const done = await advance(claimed, this.deps, 'request');
      crashPoint('after_provision');
      return await this.respond(done.order, false, input.resourceUrl, done.service);
    } catch (e) {
      if (e instanceof PaymentNotTaken) throw await paymentRequired('payment_failed', notTakenMessage(`${e.reason}: ${e.message}`));
      if (e instanceof ServiceStopped) {
        throw new ApiError(409, 'service_stopped', 'The service was stopped by its owner while this payment was being settled. The payment was taken and is refunded in full automatically (GET /orders/{order_id} shows the refund); nothing was changed.', { details: [{ order_id: claimed.id }] });
      }
      if (e instanceof SettlementPending) {
        throw new ApiError(503, 'settlement_pending',
          'The payment is being settled but the outcome is not known yet. You will not be charged twice: retry this same request with the same Idempotency-Key in a few seconds to get the order.',
          { retryable: true, headers: { 'Retry-After': '5' } });
      }
      throw await this.paidNotProvisioned(claimed.id) ?? e;
    }
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
    return new ApiError(503, 'provisioning_pending',
      `The payment was taken (order ${order.id}) but the service could not be provisioned yet; it is retried `
      + 'automatically. Retry this same request with the same Idempotency-Key in a few seconds to get the service; '
      + `you will not be charged twice. If it cannot be provisioned${bound}, everything it paid is refunded `
      + `automatically: GET /orders/${order.id} shows the refund.`,
      { retryable: true, headers: { 'Retry-After': '5' }, details: [{ order_id: order.id }] });
  }

  /**
   * An upgrade was priced on the service as it was then; under the service's row lock at claim time it must still be
   * that service, so that parallel upgrades cannot each be charged for the same change.
   */
  private async upgradeStillFits(client: Client, priced: ServiceRow): Promise<void> {
    const { rows: [now] } = await client.query('SELECT product_id, limits, status FROM services WHERE id = $1 FOR UPDATE', [priced.id]);
    if (!now || now.product_id !== priced.product_id || canonicalJson(now.limits) !== canonicalJson(priced.limits) || now.status !== priced.status) {
      throw new ApiError(409, 'service_changed', 'The service changed while this upgrade was being paid (another upgrade or a status change); nothing was charged. Read the service (GET /services/{service_id}) and ask for the upgrade again if it still needs one.');
    }
  }

  /**
   * An extension was priced on the hours the service had paid then; under the service's row lock at claim time it must
   * still have them, and must still be extensible: a stop (with its refund) that got there first refuses it here,
   * before any money moves, and a stop that comes later waits for this order's lock and sees it.
   */
  private async extensionStillFits(client: Client, priced: ServiceRow): Promise<void> {
    const { rows: [now] } = await client.query('SELECT product_id, limits, status, expires_at, stopped_at FROM services WHERE id = $1 FOR UPDATE', [priced.id]);
    if (now) checkExtensible(this.live.current, now);
    if (!now || now.product_id !== priced.product_id || canonicalJson(now.limits) !== canonicalJson(priced.limits)) {
      throw new ApiError(409, 'service_changed', 'The service changed while this extension was being paid (another extension or an upgrade); nothing was charged. Read the service (GET /services/{service_id}) and extend again if it still needs more time.');
    }
  }

  /**
   * Never sells a stream that does not fit on this instance's Icecast: checked before asking for money (against a
   * count at most a second old), and exactly when the key is claimed, under a lock, so that two buyers of the last
   * place cannot both pay for it.
   */
  private async admit(demand: StreamLoad, client?: Client): Promise<HostLoad | undefined> {
    const capacity = this.options.capacity;
    if (!capacity || (demand.sources === 0 && demand.listeners === 0)) return undefined;
    if (client) {
      await capacity.lock(client);
      const load = await this.streamLoad(capacity, client);
      capacity.admit(demand, load);
      return { limits: capacity.limits, load };
    }
    if (!this.recentLoad || Date.now() - this.recentLoad.at > 1000) {
      const load = this.streamLoad(capacity);
      load.catch(() => { this.recentLoad = undefined; });
      this.recentLoad = { at: Date.now(), load };
    }
    const load = await this.recentLoad.load;
    capacity.admit(demand, load);
    return { limits: capacity.limits, load };
  }

  /**
   * The buyer limits for the key before payment is asked: a pass at most a second old, on the same snapshot, is
   * reused (this instance's own sales clear them; other instances' show within a second). A refusal is never reused.
   * The limits are checked again, exactly and under locks, when the paid order is claimed.
   */
  private checkBuyerBeforePayment(
    snapshot: Snapshot, buyer: Buyer, demand: StreamLoad, host?: HostLoad,
  ): Promise<void> {
    const key = `${buyer.apiKeyId}\n${buyer.payer ?? ''}\n${demand.sources}\n${demand.listeners}`;
    const recent = this.recentBuyerChecks.get(key);
    if (recent && recent.snapshot === snapshot && Date.now() - recent.at <= 1000) return recent.check;
    if (this.recentBuyerChecks.size >= 10_000) this.recentBuyerChecks.clear();
    const entry = { at: Date.now(), snapshot, check: checkBuyerLimits(this.db, snapshot, buyer, demand, { host }) };
    this.recentBuyerChecks.set(key, entry);
    entry.check.catch(() => { if (this.recentBuyerChecks.get(key) === entry) this.recentBuyerChecks.delete(key); });
    return entry.check;
  }

  /**
   * What this Icecast carries now, plus what paid orders not provisioned yet will add to it. Orders first: one
   * provisioned between the two reads is then counted twice (for a moment, on the safe side) instead of not at all.
   */
  private async streamLoad(capacity: StreamCapacity, client?: Client): Promise<StreamLoad> {
    const inFlight = await this.orders.inFlight(client);
    const load = await capacity.inUse(client);
    for (const order of inFlight) {
      const limits = serviceLimitsOf(this.live.current.catalog.byId.get(order.product_id)?.product, order.configuration);
      // An upgrade in flight: its whole new listener count, as the service it replaces is not looked up here.
      const added = streamLoadOf(limits, order.upgrade_of ? { limits: {} } : undefined);
      load.sources += added.sources;
      load.listeners += added.listeners;
    }
    return load;
  }

  async get(apiKeyId: string, orderId: string): Promise<Record<string, unknown> | undefined> {
    const order = await this.orders.byId(orderId);
    if (!order || order.api_key_id !== apiKeyId) return undefined;
    const target = order.upgrade_of ?? order.extension_of;
    const service = target ? await this.services.byId(target) : await this.services.forOrder(order.id);
    return { order: orderDocument(order), service: service ? this.services.document(service) : null };
  }

  /** What priced a service: the evaluation of its order, or of its latest paid upgrade, and all of them in order. */
  async pricedBy(service: ServiceRow): Promise<{ evaluation_id: string | null; evaluations: Array<{ order_id: string; evaluation_id: string | null }> }> {
    const evaluations = await this.orders.evaluationsOf(service);
    return { evaluation_id: evaluations.at(-1)?.evaluation_id ?? null, evaluations };
  }

  /** The authorization already pays for an order: this request's own (a concurrent retry) or another one. */
  private async paidBy(order: OrderRow, input: PlaceOrder, requestHash: string, paymentRequired: PaymentRequiredError): Promise<PlacedOrder> {
    if (order.state === 'failed') throw await paymentRequired('payment_failed', notTakenMessage(order.failure ?? 'settlement_failed'));
    if (order.api_key_id === input.apiKeyId && order.idempotency_key === input.idempotencyKey) return this.repeat(order, requestHash, input.resourceUrl);
    throw new ApiError(409, 'payment_already_used', 'This payment authorization already paid for another order. Sign a new payment (new nonce) for this request.');
  }

  /** The payment-identifier of a payload; a malformed one is refused before anything else happens. */
  private paymentIdOf(payload: PaymentPayload): string | undefined {
    const found = this.gateway.paymentId(payload);
    if (found && 'invalid' in found) {
      throw new ApiError(400, 'payment_id_invalid', `The payment-identifier in your payment payload is not valid: ${found.invalid}. Nothing was charged. Sign the payment again with the extension as PAYMENT-REQUIRED declares it and a valid id (generatePaymentId() of @x402/extensions/payment-identifier), or without one.`);
    }
    return found?.id;
  }

  /**
   * A payment-identifier already bound to an order of this API key: the very same payload for the same request is a
   * resend (whatever its Idempotency-Key) and gets that order; anything else under that id is refused.
   */
  private async samePayment(order: OrderRow, requestHash: string, payload: PaymentPayload, resourceUrl: string): Promise<PlacedOrder> {
    if (order.request_hash !== requestHash || canonicalJson(order.payment) !== canonicalJson(payload)) {
      throw new ApiError(409, 'payment_id_conflict', `The payment-identifier ${String(order.payment_id)} already belongs to order ${order.id}, paid with another payment payload or for another request. Nothing was charged. Use a new id (generatePaymentId()) for a new purchase, or resend exactly the original payload and body to get that order back.`);
    }
    return this.repeat(order, requestHash, resourceUrl);
  }

  /** A request with a key that is already bound: same body → the same order (possibly after waiting), other body → 409. */
  private async repeat(existing: OrderRow, requestHash: string, resourceUrl: string): Promise<PlacedOrder> {
    if (existing.request_hash !== requestHash) {
      throw new ApiError(409, 'idempotency_key_reused', 'This Idempotency-Key already belongs to an order with a different body. Use a new Idempotency-Key for a new order, or repeat the original body to get that order back.');
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
      throw new ApiError(409, 'idempotency_in_progress', 'The earlier attempt with this key failed without charging; retry now with a new payment.', { retryable: true, headers: { 'Retry-After': '1' } });
    }
    throw new ApiError(409, 'idempotency_in_progress', 'An order with this Idempotency-Key is still being paid or provisioned. Retry this same request in a moment to get it; you will not be charged twice.',
      { retryable: true, headers: { 'Retry-After': '1' } });
  }

  private async respond(order: OrderRow, replay: boolean, resourceUrl: string, provisioned?: ServiceRow): Promise<PlacedOrder> {
    const [service, evaluation] = await Promise.all([
      provisioned ?? ((order.upgrade_of ?? order.extension_of) ? this.services.byId((order.upgrade_of ?? order.extension_of)!) : this.services.forOrder(order.id)),
      this.gateway.receipts && order.evaluation_id ? this.audit.get(order.evaluation_id) : undefined,
    ]);
    if (order.state !== 'active' || !service) throw new Error(`order ${order.id} is ${order.state} without a service`);
    const settlement = settlementOf(order);
    const extensions = await this.gateway.receipts?.receipt({
      resourceUrl, payer: settlement.payer ?? order.payer, network: settlement.network, transaction: settlement.transaction,
      issuedAt: order.settled_at ?? order.created_at, orderId: order.id, evaluationId: order.evaluation_id,
      evaluationHash: evaluation?.record_hash ?? null, amountAtomic: order.amount_atomic,
    });
    return {
      body: { ok: true, order: orderDocument(order), service: this.services.document(service), idempotent_replay: replay },
      paymentResponse: PaymentGateway.responseHeader({ ...settlement, ...(extensions && { extensions }) }),
    };
  }
}

function refundedError(order: OrderRow): ApiError {
  return new ApiError(409, 'order_refunded',
    `This order was paid but could not be delivered (${order.failure ?? 'not provisioned'}); everything it paid is `
    + `refunded. GET /orders/${order.id} shows the refund and its transaction. Order again with a new Idempotency-Key `
    + 'if you still need the service.', { details: [{ order_id: order.id }] });
}

/** An extension brings an expired service back on its Icecast (a stream again); otherwise it adds nothing there. */
function revivalLoadOf(service: ServiceRow): StreamLoad {
  return service.status === 'expired' ? streamLoadOf(service.limits) : { sources: 0, listeners: 0 };
}

/** The 402's warning when the official x402 client would refuse this amount with its default spend cap. */
function aboveClientCap(amountAtomic: string): string {
  if (BigInt(amountAtomic) <= CLIENT_DEFAULT_CAP_ATOMIC) return '';
  return ` Note: the official x402 client (@x402/fetch, @x402/axios, x402Client) refuses any payment above 1 USDC by default (maxAmountPerPayment); raise it first, e.g. client.setSpendControls({ maxAmountPerPayment: '$${atomicToAmount(amountAtomic, 6)}' }).`;
}

/** A payload's resource.url as an error message quotes it (the agent's own text, cut short). */
function describeResource(url: unknown): string {
  return typeof url === 'string' && url.length > 0 ? JSON.stringify(url.slice(0, 200)) : 'no resource (resource.url is missing)';
}

/** What an agent reads when its payment was not taken: why, and what to do. */
function notTakenMessage(failure: string): string {
  return `The payment was not taken (${failure}). Nothing was charged and nothing was ordered. Sign a new payment (a new authorization) for the requirements in this PAYMENT-REQUIRED header and retry with the same Idempotency-Key.`;
}

function settlementOf(order: OrderRow): SettleResponse {
  const s = order.settlement as Partial<SettleResponse> | null;
  return { success: true, transaction: s?.transaction ?? '', network: (s?.network ?? order.network) as SettleResponse['network'], payer: s?.payer ?? order.payer };
}

function orderDocument(order: OrderRow): Record<string, unknown> {
  return {
    id: order.id,
    status: order.state,
    product_id: order.product_id,
    billing: order.billing,
    configuration: order.configuration,
    amount: { amount: atomicToAmount(order.amount_atomic, 6), amount_atomic: order.amount_atomic, currency: 'USDC', decimals: 6 },
    quote_id: order.quote_id,
    evaluation_id: order.evaluation_id,
    ...(order.upgrade_of && { upgrade_of: order.upgrade_of }),
    ...(order.extension_of && { extension_of: order.extension_of }),
    payment: {
      protocol: 'x402', network: order.network, payer: order.payer,
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
