import { Decimal } from '../rules/index.js';
import { evaluatePrice, type PriceInput } from './evaluate.js';
import { SnapshotCache } from './snapshot-cache.js';
import type { Snapshot } from './snapshot-shape.js';

export type Billing = NonNullable<PriceInput['billing']>;
export const BILLINGS: Billing[] = ['one_time', 'quote', 'monthly', 'annual'];

/**
 * Whether an agent can order a product with one billing, and, when the price does not depend on parameters, for how
 * much.
 */
export interface BillingOption {
  billing: Billing;
  agent_orderable: boolean;
  /** The USDC price, for products without parameters (e.g. a subscription at a fixed price in another currency). */
  price?: { amount: string; amount_atomic: string; currency: 'USDC'; decimals: 6 };
  reason?: string;
}

const cache = new SnapshotCache<Promise<Map<string, BillingOption[]>>>();

/**
 * Every billing the rules accept for each product, and whether it can be ordered within the order limits: derived by
 * evaluating the price rules, never from a list, so that discovery offers no billing that can never be ordered
 * (radio-directo annual costs more than the order maximum). Products with parameters are evaluated at their example
 * configuration (required parameters at their default or minimum): their billing is accepted or not whatever the
 * parameters, and their price is left to a quote.
 */
export function billingOptions(snapshot: Snapshot): Promise<Map<string, BillingOption[]>> {
  return cache.get(snapshot, () => build(snapshot));
}

async function build(snapshot: Snapshot): Promise<Map<string, BillingOption[]>> {
  const { minimum, maximum } = snapshot.catalog.settings.order_limits;
  const result = new Map<string, BillingOption[]>();
  for (const entry of snapshot.catalog.products) {
    const verdict = snapshot.verdicts.get(entry.product.id)!;
    if (verdict.rejection) continue;
    const fixedPrice = Object.keys(entry.acceptedParameters).length === 0;
    const parameters = Object.fromEntries(
      Object.entries(entry.acceptedParameters)
        .filter(([, d]) => d.required)
        .map(([name, d]) => [name, d.default ?? d.minimum ?? (d.type === 'boolean' ? false : 1)]),
    );
    const options: BillingOption[] = [];
    for (const billing of BILLINGS) {
      const evaluation = await evaluatePrice(snapshot, { product_id: entry.product.id, parameters, billing }).catch(
        () => undefined,
      );
      if (evaluation?.outcome !== 'priced' || evaluation.output.decimals !== 6) continue;
      const amount = new Decimal(evaluation.output.total_atomic).dividedBy(1_000_000);
      const price = {
        amount: amount.toFixed(),
        amount_atomic: evaluation.output.total_atomic,
        currency: 'USDC' as const,
        decimals: 6 as const,
      };
      const outOfRange = fixedPrice && (amount.lessThan(minimum) || amount.greaterThan(maximum));
      const notOrderable = verdict.notOrderable.map((r) => r.reason).join(' ');
      options.push({
        billing,
        agent_orderable: !notOrderable && !outOfRange,
        ...(fixedPrice && { price }),
        ...(outOfRange && {
          reason:
            `Costs ${amount.toFixed()} USDC, outside the agent order limits (${minimum} to ${maximum} ` +
            `${snapshot.catalog.settings.order_limits.currency}): agents cannot order it with billing ` +
            `${billing}.`,
        }),
        ...(!outOfRange && notOrderable && { reason: notOrderable }),
      });
    }
    result.set(entry.product.id, options);
  }
  return result;
}
