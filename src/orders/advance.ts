import type { Logger } from '../log/index.js';
import { Decimal } from '../rules/index.js';
import type { AuthorizationLedger, PaymentGateway, PaymentPayload, PaymentRequirements } from '../payments/index.js';
import type { LiveSnapshot } from '../pricing/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';
import type { Database } from '../store/index.js';
import { crashPoint } from './crash-point.js';
import type { OrderRow, OrderStore } from './order-store.js';
import { serviceLimitsOf } from './service-limits.js';

export interface AdvanceDeps {
  metrics?: { settlements: { inc(labels: { result: string }): void }; provisioningFailures: { inc(): void } };
  db: Database;
  orders: OrderStore;
  services: ServiceRecords;
  gateway: PaymentGateway;
  ledger: AuthorizationLedger;
  live: LiveSnapshot;
  log: Logger;
}

/** The settlement outcome could not be learned (facilitator or chain unreachable): the order stays settling for recovery. */
export class SettlementPending extends Error {}

/** A definite refusal: the payment was not taken. */
export class PaymentNotTaken extends Error {
  constructor(readonly reason: string, message: string) {
    super(message);
  }
}

/**
 * Moves one order as far as it can go: settling → provisioning → active. The only code that changes an order's state,
 * called by the request that claimed it and by the recovery loop. Never charges twice: an authorization that the
 * token already reports as used counts as settled.
 */
export async function advance(order: OrderRow, deps: AdvanceDeps, origin: 'request' | 'recovery'): Promise<{ order: OrderRow; service?: ServiceRow }> {
  let current = order;
  if (current.state === 'settling') current = await settle(current, deps, origin);
  if (current.state === 'provisioning') return provision(current, deps);
  return { order: current };
}

async function settle(order: OrderRow, deps: AdvanceDeps, origin: 'request' | 'recovery'): Promise<OrderRow> {
  const payload = order.payment as unknown as PaymentPayload;
  const requirements = order.requirements as unknown as PaymentRequirements;

  if (origin === 'recovery' && (await usedOnChain(order, deps))) return recordSettledFromChain(order, deps);
  if (origin === 'recovery' && BigInt(order.valid_before) * 1000n <= BigInt(Date.now() + 6000)) {
    await deps.orders.failedUnpaid(order.id, 'the payment authorization expired before it could be settled; nothing was charged');
    return (await deps.orders.byId(order.id))!;
  }

  let result;
  try {
    result = await deps.gateway.settle(payload, requirements);
  } catch (e) {
    deps.log.warn({ order_id: order.id, err: e }, 'settlement outcome unknown');
    deps.metrics?.settlements.inc({ result: 'unknown' });
    if (await usedOnChain(order, deps).catch(() => false)) return recordSettledFromChain(order, deps);
    throw new SettlementPending((e as Error).message);
  }
  deps.metrics?.settlements.inc({ result: result.success ? 'settled' : 'refused' });
  if (result.success) {
    crashPoint('after_chain_settle');
    const settled = await deps.orders.settled(order.id, { ...result });
    crashPoint('after_settled');
    deps.log.info({ order_id: order.id, transaction: result.transaction }, 'settled');
    return settled;
  }
  // A refusal may hide an earlier attempt of ours that went through (e.g. "authorization is used"): ask the token.
  if (await usedOnChain(order, deps)) return recordSettledFromChain(order, deps);
  const reason = result.errorReason ?? 'settlement_failed';
  await deps.orders.failedUnpaid(order.id, `${reason}: ${result.errorMessage ?? ''}`.trim());
  throw new PaymentNotTaken(reason, result.errorMessage ?? reason);
}

async function usedOnChain(order: OrderRow, deps: AdvanceDeps): Promise<boolean> {
  return deps.ledger.isUsed(order.payer, order.nonce);
}

async function recordSettledFromChain(order: OrderRow, deps: AdvanceDeps): Promise<OrderRow> {
  const transaction = await deps.ledger.transactionOf(order.payer, order.nonce).catch(() => undefined);
  const settled = await deps.orders.settled(order.id, { success: true, transaction: transaction ?? '', network: order.network, payer: order.payer, recovered: true });
  deps.log.info({ order_id: order.id, transaction }, 'settlement found on chain');
  return settled;
}

async function provision(order: OrderRow, deps: AdvanceDeps): Promise<{ order: OrderRow; service: ServiceRow }> {
  const limits = serviceLimitsOf(deps.live.current.catalog.byId.get(order.product_id)?.product, order.configuration);
  const expiresAt = expiryOf(order);
  const done = await deps.db.transaction(async (client) => {
    const service = order.upgrade_of
      ? await deps.services.applyUpgrade(client, order.upgrade_of, order.product_id, limits)
      : await deps.services.createForOrder(client, order, limits, expiresAt);
    const active = await deps.orders.activate(client, order.id);
    return { order: active ?? order, service };
  }).catch((e) => {
    deps.metrics?.provisioningFailures.inc();
    throw e;
  });
  deps.log.info({ order_id: order.id }, 'provisioned');
  return done;
}

/** Paid time + duration: fractional hours to the millisecond, whole calendar months or years for subscriptions. */
function expiryOf(order: OrderRow): Date | null {
  const start = order.settled_at ?? new Date();
  const hours = order.configuration.duration_hours;
  if (typeof hours === 'number') return new Date(start.getTime() + new Decimal(String(hours)).times(3_600_000).floor().toNumber());
  const end = new Date(start);
  if (order.billing === 'monthly') end.setUTCMonth(end.getUTCMonth() + 1);
  else if (order.billing === 'annual') end.setUTCFullYear(end.getUTCFullYear() + 1);
  else return null;
  return end;
}
