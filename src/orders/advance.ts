import { ApiError } from '../errors/index.js';
import { provisionedEvent } from '../events/index.js';
import type { Logger } from '../log/index.js';
import type { Checkout, PaymentEvidence, TransferProof } from '../payments/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { firstExpiry, type ServiceRecords, type ServiceRow } from '../services/index.js';
import { timedOut, type Client, type Database } from '../store/index.js';
import { crashPoint } from './crash-point.js';
import { provisioningOf } from './order-kind.js';
import { paymentOf } from './order-payment.js';
import type { OrderRow, OrderStore } from './order-store.js';
import { serviceLimitsOf } from './service-limits.js';

export interface AdvanceDeps {
  metrics?: { settlements: { inc(labels: { result: string }): void }; provisioningFailures: { inc(): void } };
  db: Database;
  orders: OrderStore;
  services: ServiceRecords;
  /** Settles payments and says what the chain shows of them. */
  checkout: Checkout;
  live: LiveSnapshot;
  log: Logger;
}

/**
 * The settlement's outcome is not known yet: the facilitator did not answer, answered `settlement_pending`, or refused
 * while the authorization can still be used (a transfer it broadcast may land later). The order stays settling and
 * recovery asks the chain until the transfer shows or the authorization expires unused.
 */
export class SettlementPending extends Error {
  constructor(
    message: string,
    /** The unix time from which the payment can no longer be settled: the latest the outcome can be known. */
    readonly validUntil?: string,
  ) {
    super(message);
  }
}

/** A definite refusal: the payment was not taken. */
export class PaymentNotTaken extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Moves one order as far as it can go: settling → provisioning → active, or failed when the payment was not taken.
 * Called by the request that claimed it and by the recovery loop; each state change is the order store's.
 * An order counts as paid only on proof: the token's AuthorizationUsed log for its authorization in a transaction that
 * also moved exactly its amount from the payer to the seller. Never charges twice: a settlement is sent only while the
 * authorization is unused.
 */
export async function advance(order: OrderRow, deps: AdvanceDeps, origin: 'request' | 'recovery'): Promise<Advanced> {
  if (order.state === 'settling') return settle(order, deps, origin);
  if (order.state === 'provisioning') return provision(order, deps);
  return { order };
}

type Advanced = { order: OrderRow; service?: ServiceRow };

async function settle(order: OrderRow, deps: AdvanceDeps, origin: 'request' | 'recovery'): Promise<Advanced> {
  const payment = paymentOf(order);
  if (origin === 'recovery') {
    const before = await deps.checkout.evidence(payment);
    if (before.kind !== 'unused') return conclude(order, before, deps);
    // The facilitator refuses a payment this close to its end; it may still land from an earlier attempt.
    if (BigInt(payment.validUntil) * 1000n <= BigInt(Date.now() + 6000))
      return expiredOrPending(order, undefined, deps);
  }

  let result;
  try {
    // With several facilitators: a payment sent to one before goes to that one only (its outcome there may be
    // unknown), and the one it is sent to is recorded before it leaves.
    result = await deps.checkout.settle(payment, {
      sentTo: order.facilitator,
      record: async (url) => {
        await deps.orders.sentTo(order.id, url);
        order.facilitator = url;
      },
    });
  } catch (e) {
    deps.log.warn({ order_id: order.id, err: e }, 'settlement outcome unknown');
    deps.metrics?.settlements.inc({ result: 'unknown' });
    const found = await deps.checkout.evidence(payment).catch(() => undefined);
    if (found && found.kind !== 'unused') return conclude(order, found, deps);
    throw new SettlementPending((e as Error).message, payment.validUntil);
  }
  deps.metrics?.settlements.inc({ result: result.success ? 'settled' : 'refused' });
  if (result.success) crashPoint('after_chain_settle');
  // The facilitator's word is checked against the chain: its transaction first, else a search from the claim.
  const evidence =
    (result.success && result.transaction
      ? await deps.checkout.evidenceOfTransaction(result.transaction, payment).catch(() => undefined)
      : undefined) ?? (await deps.checkout.evidence(payment).catch(() => ({ kind: 'not_visible_yet' }) as const));
  if (evidence.kind !== 'unused') return conclude(order, evidence, deps);
  if (result.success) {
    deps.log.warn(
      { order_id: order.id, transaction: result.transaction },
      'the facilitator reported a settlement the chain does not show',
    );
    throw new SettlementPending(
      `the facilitator reported transaction ${result.transaction}, which the chain does not show yet`,
      payment.validUntil,
    );
  }
  return expiredOrPending(order, result, deps);
}

/**
 * A refusal ends an order only when the chain proves nothing can be charged any more: the authorization unused at a
 * block past its valid-until. Until then a facilitator's "no" (settlement_pending, a timeout reported as a failure,
 * any error after it broadcast) may still become a transfer, and the order waits for recovery.
 */
async function expiredOrPending(
  order: OrderRow,
  refusal: { errorReason?: string; errorMessage?: string; transaction?: string } | undefined,
  deps: AdvanceDeps,
): Promise<never> {
  const reason = refusal ? (refusal.errorReason ?? 'settlement_failed') : 'authorization_expired';
  const expired = await deps.checkout.expiredUnused(paymentOf(order)).catch(() => false);
  if (expired) {
    const message = refusal
      ? (refusal.errorMessage ?? reason)
      : 'the payment authorization expired before it could be settled';
    return fail(order, reason, `${message}; the authorization expired unused on chain`, deps);
  }
  if (refusal) {
    deps.log.warn(
      { order_id: order.id, reason, message: refusal.errorMessage, transaction: refusal.transaction },
      'the facilitator did not settle; waiting for the chain until the authorization expires',
    );
  }
  throw new SettlementPending(
    refusal ? `the facilitator answered ${reason}` : 'the authorization has not been used yet',
    order.payment_valid_until,
  );
}

/** Records what the chain proved: paid (→ provisioning → active), or not paid and never will be (→ failed). */
async function conclude(
  order: OrderRow,
  evidence: Exclude<PaymentEvidence, { kind: 'unused' }>,
  deps: AdvanceDeps,
): Promise<Advanced> {
  switch (evidence.kind) {
    case 'paid':
      return settleAndProvision(order, evidence.proof, deps);
    case 'canceled':
      return fail(
        order,
        'authorization_canceled',
        `the payer cancelled this payment authorization on chain (cancelAuthorization in transaction ${evidence.transaction}, block ${evidence.block_number}) before it was settled`,
        deps,
      );
    case 'spent_elsewhere':
      return fail(
        order,
        'authorization_spent_elsewhere',
        evidence.transaction
          ? `this payment authorization was used by transaction ${evidence.transaction} (block ${evidence.block_number}) for another transfer than ${order.amount_atomic} atomic USDC to ${order.pay_to}`
          : 'this payment authorization was used or cancelled before this order was claimed',
        deps,
      );
    case 'not_visible_yet':
      throw new SettlementPending('the authorization is used on chain but its transaction is not visible yet');
  }
}

async function fail(order: OrderRow, reason: string, message: string, deps: AdvanceDeps): Promise<never> {
  await deps.orders.failedUnpaid(order.id, `${reason}: ${message}`);
  deps.log.info({ order_id: order.id, reason }, 'order failed: payment not taken');
  throw new PaymentNotTaken(reason, message);
}

/** Provisioning failed inside the settlement's transaction: it is rolled back, and the settlement committed alone. */
class ProvisioningFailed extends Error {
  constructor(readonly failure: unknown) {
    super('provisioning failed');
  }
}

/**
 * The proven payment and the provisioning it pays for, in one transaction: one commit (one WAL flush, one turn at the
 * chain head for both chained states) instead of two. If provisioning fails, that transaction is rolled back and the
 * settlement alone is committed in another (a savepoint would cost every purchase a round trip for this rare case):
 * the order stays "provisioning" for recovery, as when they were two transactions; a crash in between loses only
 * uncommitted work, and recovery finds the transfer on chain again.
 * Nothing counts as paid before its proof would survive a restart of the chain: the chain state that proves the
 * payment is saved (the embedded chain's checkpoint) before the settlement commits. A new stream, the usual case, is
 * one statement after that save; an upgrade, an extension or an order that has its service already, a transaction
 * whose statements run while the chain state is saved.
 */
async function settleAndProvision(order: OrderRow, proof: TransferProof, deps: AdvanceDeps): Promise<Advanced> {
  const saved = deps.checkout.saved().then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  const chainStateSaved = async () => {
    const saveError = await saved;
    if (saveError)
      throw new SettlementPending(`the chain state that proves the payment could not be saved: ${saveError.message}`);
  };
  const settle = async (): Promise<Advanced> =>
    (provisioningOf(order).newStream ? await settleIntoNewService(order, proof, deps, chainStateSaved) : undefined) ??
    (await deps.db.transaction(async (client) => {
      const recorded = await recordPaidAndProvision(client, order, proof, deps);
      await chainStateSaved();
      return recorded;
    }));
  const done: Advanced & { provisioningError?: unknown } = await settle().catch(async (e: unknown) => {
    if (!(e instanceof ProvisioningFailed)) throw e;
    const settled = await deps.db.transaction(async (client) => {
      const paid = await recordPaid(client, order, proof, deps);
      await chainStateSaved();
      return paid;
    });
    return { order: settled, provisioningError: e.failure };
  });
  // One line for both when provisioning came with the settlement (a new stream's usual case): a line fewer per purchase.
  const provisioned = !done.provisioningError && done.service !== undefined;
  deps.log.info(
    { order_id: order.id, transaction: proof.transaction, block: proof.block_number },
    provisioned ? 'settled and provisioned: transfer proven on chain' : 'settled: transfer proven on chain',
  );
  if (done.provisioningError) {
    deps.metrics?.provisioningFailures.inc();
    throw done.provisioningError;
  }
  return { order: done.order, service: done.service };
}

function settlementOf(order: OrderRow, proof: TransferProof): Record<string, unknown> {
  return { success: true, transaction: proof.transaction, network: order.network, payer: order.payer, proof };
}

/**
 * A new stream's settlement, service and activation in one statement that commits by itself, once the chain state is
 * saved: three round trips fewer than a transaction, and one chained order state (settling → active) instead of two.
 * Undefined when the order had left "settling" (the transaction's path then reads it); an error PostgreSQL answered
 * rolled the statement back: ProvisioningFailed, and the settlement is committed alone.
 */
async function settleIntoNewService(
  order: OrderRow,
  proof: TransferProof,
  deps: AdvanceDeps,
  chainStateSaved: () => Promise<void>,
): Promise<Advanced | undefined> {
  await chainStateSaved();
  // A crash here loses the settlement, not committed yet: recovery finds the transfer on chain again.
  crashPoint('after_settled');
  const settledAt = new Date();
  const limits = serviceLimitsOf(deps.live.current.catalog.byId.get(order.product_id)?.product, order.configuration);
  const insert = deps.services.newServiceInsert(
    order,
    limits,
    expiryOf({ ...order, settled_at: settledAt }),
    4,
    'paid',
  );
  const provisioned = { ...provisionedEvent(order, insert.service), apiKeyId: order.api_key_id };
  try {
    const done = await deps.orders.settleIntoNewService(
      order,
      settlementOf(order, proof),
      settledAt,
      insert,
      provisioned,
    );
    if (done && !done.service) return { order: done.order, service: await deps.services.forOrder(order.id) };
    return done;
  } catch (e) {
    // Not answered (connection lost, given up): it may have committed; the order's lease brings recovery.
    if (e instanceof ApiError || timedOut(e)) throw e;
    throw new ProvisioningFailed(e);
  }
}

async function recordPaidAndProvision(
  client: Client,
  order: OrderRow,
  proof: TransferProof,
  deps: AdvanceDeps,
): Promise<Advanced> {
  const settled = await recordPaid(client, order, proof, deps);
  if (settled.state !== 'provisioning') return { order: settled };
  try {
    return await provisionWith(client, settled, deps);
  } catch (e) {
    // A connection gone silent takes no ROLLBACK either: the whole transaction fails, as with a savepoint.
    throw timedOut(e) ? e : new ProvisioningFailed(e);
  }
}

async function recordPaid(client: Client, order: OrderRow, proof: TransferProof, deps: AdvanceDeps): Promise<OrderRow> {
  // An upgrade's claim locks the service, then inserts its order (unique: one upgrade in flight per service). Lock in
  // that order here too: settling first would hold the in-flight order's new row version while waiting for the
  // service, and a concurrent claim waiting on that version would deadlock with us.
  const target = provisioningOf(order).serviceOf(order);
  if (target) await deps.services.lock(client, target);
  const settled = await deps.orders.settled(order, settlementOf(order, proof), client);
  // A crash here loses the uncommitted settlement: recovery finds the transfer on chain again.
  crashPoint('after_settled');
  return settled;
}

async function provision(order: OrderRow, deps: AdvanceDeps): Promise<{ order: OrderRow; service: ServiceRow }> {
  const done = await deps.db
    .transaction((client) => provisionWith(client, order, deps))
    .catch((e) => {
      deps.metrics?.provisioningFailures.inc();
      throw e;
    });
  deps.log.info({ order_id: order.id }, 'provisioned');
  return done;
}

async function provisionWith(
  client: Client,
  order: OrderRow,
  deps: AdvanceDeps,
): Promise<{ order: OrderRow; service: ServiceRow }> {
  const limits = serviceLimitsOf(deps.live.current.catalog.byId.get(order.product_id)?.product, order.configuration);
  const provisioning = provisioningOf(order);
  if (provisioning.newStream) {
    // The usual case: the new service, the activation and its event in one round trip (the INSERT from $2 on).
    const insert = deps.services.newServiceInsert(order, limits, expiryOf(order), 2);
    const created = await deps.orders.activateWithNewService(
      client,
      order,
      insert,
      provisionedEvent(order, insert.service),
    );
    if (created) return { order: created.order ?? (await notActivated(client, order)), service: created.service };
  }
  const service = await provisioning.apply(client, order, deps.services, limits);
  const active = await deps.orders.activate(client, order.id, provisionedEvent(order, service));
  return { order: active ?? (await notActivated(client, order)), service };
}

/** An order provisioned but left unactivated: refunded meanwhile (nothing is delivered), or already active. */
async function notActivated(client: Client, order: OrderRow): Promise<OrderRow> {
  // Refunded in full meanwhile (not provisioned within the bound, src/refunds): the service must not be delivered too.
  const { rows } = await client.query('SELECT state FROM orders WHERE id = $1', [order.id]);
  if (rows[0]?.state === 'refunded') {
    throw new Error(`order ${order.id} was refunded while it was being provisioned; nothing is delivered`);
  }
  return order;
}

/** Paid time + duration (see firstExpiry). */
function expiryOf(order: OrderRow): Date | null {
  return firstExpiry(order.settled_at ?? new Date(), {
    hours: order.configuration.duration_hours,
    billing: order.billing,
  });
}
