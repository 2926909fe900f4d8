import { ApiError } from '../errors/index.js';
import { Decimal } from '../rules/index.js';
import { evaluateExtension, type ExtensionEvaluation, type ExtensionInput, type Snapshot } from '../pricing/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OrderPrice } from './order-price.js';

export type PricedExtension = OrderPrice & {
  input: ExtensionInput;
  evaluation: Extract<ExtensionEvaluation, { outcome: 'priced' }>;
};

/** How long after its expiry a service may still be extended when the catalog does not say. */
export const DEFAULT_GRACE_HOURS = 24;

/** The catalog's grace period after expiry, in milliseconds. */
export function graceMsOf(snapshot: Snapshot): number {
  return (snapshot.catalog.settings.extensions?.grace_hours ?? DEFAULT_GRACE_HOURS) * 3_600_000;
}

/**
 * Whether more paid time can be sold for this service now: never once it was stopped (and refunded); an active or
 * suspended service, or an expired one within the grace period. Throws the agent's error otherwise.
 */
export function checkExtensible(
  snapshot: Snapshot,
  service: Pick<ServiceRow, 'status' | 'expires_at' | 'product_id'> & { stopped_at?: Date | null },
  now = Date.now(),
): void {
  if (service.stopped_at) {
    throw new ApiError(
      409,
      'service_stopped',
      `This service cannot be extended: it was stopped and refunded at ${service.stopped_at.toISOString()}. Nothing was charged. Order a new service with POST /orders.`,
    );
  }
  if (!service.expires_at) {
    throw new ApiError(
      409,
      'extension_not_possible',
      `A ${service.product_id} service has no paid time to extend (it is billed by the month or year). Nothing was charged.`,
    );
  }
  if (service.status === 'active' || service.status === 'suspended') return;
  if (service.status === 'expired') {
    const graceEnd = service.expires_at.getTime() + graceMsOf(snapshot);
    if (now < graceEnd) return;
    throw new ApiError(
      409,
      'extension_grace_over',
      `The service expired at ${service.expires_at.toISOString()} and could be extended until ${new Date(graceEnd).toISOString()}; that grace period is over. Nothing was charged. Order a new service with POST /orders.`,
    );
  }
  throw new ApiError(
    409,
    'extension_not_possible',
    `The service is ${service.status}; only active, suspended or recently expired services can be extended. Nothing was charged.`,
  );
}

/**
 * An extension is sold by the same smallest step as an order of its product: its minimum duration_hours (1 h in the
 * shipped catalog). Less would be charged at least the order minimum for almost no time. Refused before any payment.
 */
export function checkLongEnough(snapshot: Snapshot, productId: string, hours: number): void {
  const minimum = snapshot.catalog.byId.get(productId)?.acceptedParameters.duration_hours?.minimum;
  if (minimum === undefined || !new Decimal(String(hours)).lessThan(String(minimum))) return;
  const unit = new Decimal(String(minimum)).equals(1) ? 'hour' : 'hours';
  throw new ApiError(
    422,
    'extension_too_short',
    `A ${productId} service is extended by at least ${minimum} ${unit} (its product's minimum duration_hours, as for an order); ${hours} was asked. Nothing was charged. Send duration_hours of ${minimum} or more.`,
    { details: [{ pointer: '/duration_hours', code: 'minimum', message: `must be >= ${minimum}`, minimum }] },
  );
}

/** The price of `hours` more paid time on a service (see evaluateExtension), after checking it can be extended. */
export async function priceExtension(
  snapshot: Snapshot,
  service: ServiceRow,
  hours: number,
  now = Date.now(),
): Promise<PricedExtension> {
  checkExtensible(snapshot, service, now);
  checkLongEnough(snapshot, service.product_id, hours);
  const input: ExtensionInput = {
    service_id: service.id,
    product_id: service.product_id,
    limits: service.limits,
    paid_hours: Number(service.limits.duration_hours ?? 0),
    extend_hours: hours,
  };
  const evaluation = await evaluateExtension(snapshot, input);
  if (evaluation.outcome === 'refused')
    throw new ApiError(409, evaluation.code, `${evaluation.message} Nothing was charged.`);
  return { priced: evaluation.total, amountAtomic: evaluation.amount_atomic, input, evaluation };
}

/**
 * What service.expiring says about extending: the REST operation and the MCP tool, and the price of one more hour
 * now (from the same rules as the 402), or why the service cannot be extended.
 */
export function extendHint(live: { current: Snapshot }, apiBaseUrl: () => string) {
  return async (
    service: Pick<ServiceRow, 'id' | 'product_id' | 'limits' | 'expires_at'> & { status: string },
  ): Promise<Record<string, unknown>> => {
    const operation = {
      method: 'POST',
      url: `${apiBaseUrl()}/services/${service.id}/extend`,
      body: { duration_hours: 1 },
      mcp_tool: 'extend_service',
    };
    try {
      const priced = await priceExtension(live.current, service as ServiceRow, 1);
      const amount = new Decimal(priced.amountAtomic).dividedBy(1_000_000).toFixed();
      return {
        extend: { ...operation, price_for_1_hour: { amount, amount_atomic: priced.amountAtomic, currency: 'USDC' } },
      };
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      return { extend: { ...operation, possible: false, reason: e.message } };
    }
  };
}
