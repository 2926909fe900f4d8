import { Decimal } from '../rules/index.js';
import { evaluatePrice, type PriceEvaluation, type PriceInput } from './evaluate.js';
import type { Snapshot } from './snapshot-shape.js';

type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;

/**
 * Everything an upgrade's price depends on besides the snapshot, fixed when it was priced, so that a replay does not
 * depend on the clock or on the service as it is later.
 */
export interface UpgradeInput {
  service_id: string;
  from_product_id: string;
  to_product_id: string;
  /** The service's limits when the upgrade was priced. */
  limits: Record<string, unknown>;
  /** Paid time left, in hours rounded up to 1/100 h. */
  remaining_hours: number;
  /** What was paid for the service so far: its order and each upgrade, in atomic units, and the hours each paid for. */
  paid: Array<{ order_id: string; amount_atomic: string; hours: number }>;
}

export type UpgradeEvaluation =
  | { outcome: 'refused'; message: string }
  | {
      outcome: 'priced';
      /** The target product for the remaining hours (at least its minimum duration). */
      target: Priced;
      targetInput: PriceInput;
      /** The current product for the same hours: what the unused time is worth now. */
      current?: Priced;
      currentInput?: PriceInput;
      /**
       * What is taken off: the current product's price for the time without its transfer, at most the unused share of
       * what was paid.
       */
      credit_atomic: string;
      minimum_atomic: string;
      /** What the agent pays: the target price minus the credit, at least the order minimum. */
      amount_atomic: string;
    };

/**
 * The price of turning a service into another product for the rest of its paid time. Both prices come from the
 * rules; the credit never exceeds the unused share of the money actually received for the service, and the
 * transfer bought before is not credited because an upgrade renews it.
 */
export async function evaluateUpgrade(snapshot: Snapshot, input: UpgradeInput): Promise<UpgradeEvaluation> {
  const target = snapshot.catalog.byId.get(input.to_product_id);
  if (!target) return { outcome: 'refused', message: `There is no product ${input.to_product_id}.` };
  const minimumHours = Number(target.acceptedParameters.duration_hours?.minimum ?? 0);
  const hours = Math.max(minimumHours, input.remaining_hours);
  const parametersFor = (accepted: Record<string, unknown>) => {
    const picked = Object.fromEntries(Object.entries(input.limits).filter(([name]) => name in accepted));
    return { ...picked, duration_hours: hours };
  };

  const targetInput: PriceInput = {
    product_id: input.to_product_id,
    parameters: parametersFor(target.acceptedParameters),
  };
  const targetPrice = await evaluatePrice(snapshot, targetInput);
  if (targetPrice.outcome !== 'priced')
    return {
      outcome: 'refused',
      message: `The service's parameters do not fit ${input.to_product_id}: ${reasonOf(targetPrice)}`,
    };

  const current = snapshot.catalog.byId.get(input.from_product_id);
  const currentInput: PriceInput | undefined = current && {
    product_id: input.from_product_id,
    parameters: parametersFor(current.acceptedParameters),
  };
  const currentEvaluation = currentInput && (await evaluatePrice(snapshot, currentInput));
  const currentPrice = currentEvaluation?.outcome === 'priced' ? currentEvaluation : undefined;

  const worth = currentPrice
    ? new Decimal(currentPrice.output.total_atomic).minus(
        currentPrice.output.lines.find((l) => l.code === 'transfer')?.amount_atomic ?? 0,
      )
    : new Decimal(0);
  // Each payment covered its own hours (an upgrade, only what was left then); the unused share of each is credited at
  // most.
  const unusedPaid = input.paid.reduce(
    (sum, p) =>
      Number(p.hours) > 0
        ? sum.plus(
            new Decimal(p.amount_atomic).times(Decimal.min(input.remaining_hours, p.hours)).dividedBy(p.hours).floor(),
          )
        : sum,
    new Decimal(0),
  );
  const credit = Decimal.max(0, Decimal.min(worth, unusedPaid));
  const minimum = new Decimal(snapshot.catalog.settings.order_limits.minimum).times(1_000_000);
  const amount = Decimal.max(minimum, new Decimal(targetPrice.output.total_atomic).minus(credit));
  return {
    outcome: 'priced',
    target: targetPrice,
    targetInput,
    ...(currentPrice && { current: currentPrice, currentInput }),
    credit_atomic: credit.toFixed(0),
    minimum_atomic: minimum.toFixed(0),
    amount_atomic: amount.toFixed(0),
  };
}

function reasonOf(evaluation: PriceEvaluation): string {
  return evaluation.outcome === 'rejected' ? evaluation.rejection.message : 'unknown product';
}
