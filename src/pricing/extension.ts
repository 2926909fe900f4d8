import { Decimal } from '../rules/index.js';
import { evaluatePrice, type PriceEvaluation, type PriceInput } from './evaluate.js';
import type { Snapshot } from './snapshot-shape.js';

type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;

/** Everything an extension's price depends on besides the snapshot, fixed when it was priced (replayable). */
export interface ExtensionInput {
  service_id: string;
  product_id: string;
  /** The service's limits when the extension was priced. */
  limits: Record<string, unknown>;
  /** The hours paid for so far over the whole life of the service (its order and earlier extensions). */
  paid_hours: number;
  /** The hours asked for. */
  extend_hours: number;
}

export type ExtensionEvaluation =
  | { outcome: 'refused'; code: string; message: string }
  | {
      outcome: 'priced';
      /** The service's product for the new total of hours. */
      total: Priced;
      totalInput: PriceInput;
      /** The same product for the hours already paid: what is taken off. */
      paid: Priced;
      paidInput: PriceInput;
      minimum_atomic: string;
      maximum_atomic: string;
      /** The new total's price minus the paid hours' price, at least the order minimum. */
      amount_atomic: string;
    };

/**
 * The price of more paid time on a service, from the product's own pricing rules: the price of the whole new total
 * of hours minus the price of the hours already paid. For a formula product that is the added hours at its hourly
 * rate; for a package product, the package covering the new total minus the package that covered the paid hours.
 * The total may not pass the product's maximum duration; the amount is at least the order minimum and at most the
 * order maximum.
 */
export async function evaluateExtension(snapshot: Snapshot, input: ExtensionInput): Promise<ExtensionEvaluation> {
  const entry = snapshot.catalog.byId.get(input.product_id);
  const duration = entry?.acceptedParameters.duration_hours;
  if (!entry || !duration) {
    return refuse(
      'extension_not_possible',
      `A ${input.product_id} service is not sold by the hour, so it cannot be extended.`,
    );
  }
  const newTotal = new Decimal(String(input.paid_hours)).plus(String(input.extend_hours));
  if (duration.maximum !== undefined && newTotal.greaterThan(String(duration.maximum)))
    return tooLong(input, duration.maximum);
  const parametersFor = (hours: number) => {
    const picked = Object.fromEntries(
      Object.entries(input.limits).filter(([name]) => name in entry.acceptedParameters),
    );
    return { ...picked, duration_hours: hours };
  };
  const totalInput: PriceInput = { product_id: input.product_id, parameters: parametersFor(newTotal.toNumber()) };
  const paidInput: PriceInput = { product_id: input.product_id, parameters: parametersFor(input.paid_hours) };
  const [total, paid] = await Promise.all([evaluatePrice(snapshot, totalInput), evaluatePrice(snapshot, paidInput)]);
  if (total.outcome !== 'priced') {
    return refuse(
      'extension_not_possible',
      `The service cannot be priced for ${newTotal.toFixed()} hours: ${reasonOf(total)}`,
    );
  }
  if (paid.outcome !== 'priced')
    return refuse('extension_not_possible', `The service's paid hours cannot be priced: ${reasonOf(paid)}`);

  const { minimum, maximum: most } = snapshot.catalog.settings.order_limits;
  const minimumAtomic = new Decimal(minimum).times(1_000_000);
  const maximumAtomic = new Decimal(most).times(1_000_000);
  const amount = Decimal.max(minimumAtomic, new Decimal(total.output.total_atomic).minus(paid.output.total_atomic));
  if (amount.greaterThan(maximumAtomic)) {
    return refuse(
      'amount_out_of_range',
      `Extending by ${input.extend_hours} hours would cost ${amount.dividedBy(1_000_000).toFixed()} USDC; ` +
        `one payment may cost at most ${most} USD. Extend by fewer hours, several times.`,
    );
  }
  return {
    outcome: 'priced',
    total,
    totalInput,
    paid,
    paidInput,
    minimum_atomic: minimumAtomic.toFixed(0),
    maximum_atomic: maximumAtomic.toFixed(0),
    amount_atomic: amount.toFixed(0),
  };
}

function refuse(code: string, message: string): Extract<ExtensionEvaluation, { outcome: 'refused' }> {
  return { outcome: 'refused', code, message };
}

/** The product's maximum duration counts over the service's whole life: how many hours are left to sell. */
function tooLong(input: ExtensionInput, maximum: number): ExtensionEvaluation {
  const left = Decimal.max(0, new Decimal(String(maximum)).minus(String(input.paid_hours)));
  return refuse(
    'extension_too_long',
    `A ${input.product_id} service lasts at most ${maximum} hours over its whole life; ` +
      `${input.paid_hours} are paid, so it can be extended by at most ${left.toFixed()} hours` +
      `${left.isZero() ? ' (order a new service with POST /orders)' : ''}.`,
  );
}

function reasonOf(evaluation: PriceEvaluation): string {
  return evaluation.outcome === 'rejected' ? evaluation.rejection.message : 'unknown product';
}

/**
 * How many more hours a service of this product could still be sold (its product's maximum duration minus the hours
 * paid so far): a listener admitted now may have to be served that much longer than the current expiry.
 */
export function extensionHeadroomHours(
  snapshot: Snapshot,
  service: { product_id: string; limits: Record<string, unknown> },
): number {
  const maximum = snapshot.catalog.byId.get(service.product_id)?.acceptedParameters.duration_hours?.maximum;
  if (maximum === undefined) return 0;
  return Math.max(0, new Decimal(String(maximum)).minus(String(service.limits.duration_hours ?? 0)).toNumber());
}
