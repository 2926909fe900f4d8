import { Decimal } from 'decimal.js';

/**
 * The instant-stream price written by hand with plain decimal.js arithmetic, as the micro-benchmark's baseline:
 * base + ceil(duration_hours x per_hour) + ceil(transfer_gb x per_gb), in atomic units, plus the decimal amount.
 * Rates are those of catalog/products/instant-stream.yaml; run.ts checks the result equals evaluatePrice's.
 */
const base = new Decimal('250000');
const perHour = new Decimal('20000');
const perGb = new Decimal('15000');
const unit = new Decimal(10).pow(6);

export function baselineInstantStreamPrice(parameters: Record<string, unknown>): {
  total_atomic: string;
  amount: string;
} {
  const hours = new Decimal(parameters.duration_hours as number);
  const transfer = new Decimal((parameters.transfer_gb as number | undefined) ?? 0);
  const total = base.plus(hours.times(perHour).ceil()).plus(transfer.times(perGb).ceil());
  return { total_atomic: total.toFixed(0), amount: total.div(unit).toFixed() };
}
