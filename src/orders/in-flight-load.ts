import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { StreamLoad } from '../services/index.js';
import type { InFlightOrders } from '../hosts/index.js';
import type { Client, Row } from '../store/index.js';
import { IN_FLIGHT_ORDERS_SQL, type InFlightOrder, type OrderStore } from './order-store.js';
import { serviceLimitsOf, streamLoadOf } from './service-limits.js';

/**
 * What paid orders not provisioned yet will add, by the host each was placed on (null: an order claimed before
 * orders recorded their host). Their streams are spoken for: placement counts them beside the live services.
 */
export function inFlightOrders(live: LiveSnapshot): InFlightOrders {
  return {
    sql: IN_FLIGHT_ORDERS_SQL,
    byHost(orders: Row[]): Map<string | null, StreamLoad> {
      const byHost = new Map<string | null, StreamLoad>();
      for (const order of orders as InFlightOrder[]) {
        const limits = serviceLimitsOf(live.current.catalog.byId.get(order.product_id)?.product, order.configuration);
        // An upgrade in flight: its whole new listener count, as the service it replaces is not looked up here.
        const added = streamLoadOf(limits, order.upgrade_of ? { limits: {} } : undefined);
        const host = order.host_id ?? null;
        const sum = byHost.get(host) ?? { sources: 0, listeners: 0 };
        byHost.set(host, { sources: sum.sources + added.sources, listeners: sum.listeners + added.listeners });
      }
      return byHost;
    },
  };
}

/** inFlightOrders, read on its own (the host monitor's moves). */
export function inFlightByHost(orders: OrderStore, live: LiveSnapshot) {
  const load = inFlightOrders(live);
  return async (client?: Client): Promise<Map<string | null, StreamLoad>> => load.byHost(await orders.inFlight(client));
}
