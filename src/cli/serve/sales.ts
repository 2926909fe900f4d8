import { HostPlacement } from '../../hosts/index.js';
import { inFlightOrders, OrderRecovery, OrderService, OrderStore } from '../../orders/index.js';
import { Checkout, PaymentPrecheck } from '../../payments/index.js';
import type { ServiceRecords } from '../../services/index.js';
import { sellsStreams, type Foundation } from './foundation.js';

/**
 * Orders paid with x402, when payments are there and streams can be sold (an API instance places them on the pool's
 * hosts; an `all` instance needs its own Icecast): the order service, placement and recovery.
 */
export function sales(base: Foundation, services: ServiceRecords) {
  const { config, log, db, live, audit, pay, chainChecks, stream, metrics } = base;
  if (!(pay.gateway && pay.ledger && sellsStreams(base))) return {};
  const store = new OrderStore(db);
  const { leaseSeconds, recoveryIntervalMs } = config.orders;
  const precheck = new PaymentPrecheck(chainChecks, config.eip6492Factories);
  const checkout = new Checkout({ gateway: pay.gateway, ledger: pay.ledger, precheck });
  const deps = { db, orders: store, services, checkout, live, log, metrics };
  const placement = new HostPlacement(db, {
    downAfterSeconds: config.streaming.downAfterSeconds,
    fallbackLimits: stream.limits,
    inFlight: inFlightOrders(live),
  });
  const orders = new OrderService({
    db,
    live,
    audit,
    orders: store,
    services,
    checkout,
    advance: deps,
    leaseSeconds,
    waitForInFlightMs: 3000,
    placement,
    refundAfterMs: config.refunds.provisionTimeoutMs,
  });
  const recovery = new OrderRecovery(store, deps, log, { intervalMs: recoveryIntervalMs, leaseSeconds });
  return { orders, placement, recovery, paymentTerms: pay.gateway.terms };
}

/** What /availability shows: the live hosts, with what is in use and spoken for on each, in placement's order. */
export async function poolCapacity(placement: HostPlacement) {
  const hosts = placement.ranked(await placement.pool());
  return { hosts: hosts.map(({ limits, load }) => ({ limits, load })) };
}
