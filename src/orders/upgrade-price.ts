import { ApiError } from '../errors/index.js';
import { evaluatePrice, type PriceEvaluation, type Snapshot } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OrderPrice, Priced } from './order-price.js';

/**
 * The price of turning a service into another product for the rest of its paid time: the target product for the
 * remaining hours (its bought transfer renewed) minus what is still unused of the current product's time, at least
 * the order minimum. Both prices come from the rules; the remaining hours are rounded up to 1/100 h and are at least
 * the target's minimum duration.
 */
export async function priceUpgrade(snapshot: Snapshot, service: ServiceRow, targetId: string): Promise<OrderPrice> {
  const allowed = snapshot.catalog.settings.upgrades?.[service.product_id] ?? [];
  if (!allowed.includes(targetId)) {
    throw new ApiError(409, 'upgrade_not_possible', allowed.length
      ? `A ${service.product_id} service can be upgraded to ${allowed.join(' or ')}, not to ${targetId}.`
      : `A ${service.product_id} service cannot be upgraded.`);
  }
  if (service.status !== 'active' && service.status !== 'suspended') {
    throw new ApiError(409, 'upgrade_not_possible', `The service is ${service.status}; only active or suspended services can be upgraded. Order a new one with POST /orders.`);
  }
  const target = snapshot.catalog.byId.get(targetId)!;
  const remainingMs = (service.expires_at?.getTime() ?? Date.now()) - Date.now();
  const minimum = Number(target.acceptedParameters.duration_hours?.minimum ?? 0);
  const hours = Math.max(minimum, Math.ceil(Math.max(remainingMs, 0) / 36_000) / 100);
  const parametersFor = (accepted: Record<string, unknown>) => {
    const picked = Object.fromEntries(Object.entries(service.limits).filter(([name]) => name in accepted));
    return { ...picked, duration_hours: hours };
  };

  const targetPrice = priced(await evaluatePrice(snapshot, { product_id: targetId, parameters: parametersFor(target.acceptedParameters) }), targetId);
  const current = snapshot.catalog.byId.get(service.product_id);
  const currentPrice = current ? priced(await evaluatePrice(snapshot, { product_id: current.product.id, parameters: parametersFor(current.acceptedParameters) }), current.product.id) : undefined;
  const credit = currentPrice
    ? new Decimal(currentPrice.output.total_atomic).minus(currentPrice.output.lines.find((l) => l.code === 'transfer')?.amount_atomic ?? 0)
    : new Decimal(0);
  const floor = new Decimal(snapshot.catalog.settings.order_limits.minimum).times(1_000_000);
  const amount = Decimal.max(floor, new Decimal(targetPrice.output.total_atomic).minus(credit));
  return { priced: targetPrice, amountAtomic: amount.toFixed(0) };
}

function priced(evaluation: PriceEvaluation, productId: string): Priced {
  if (evaluation.outcome === 'priced') return evaluation;
  const reason = evaluation.outcome === 'rejected' ? evaluation.rejection.message : 'unknown product';
  throw new ApiError(409, 'upgrade_not_possible', `The service's parameters do not fit ${productId}: ${reason}`);
}
