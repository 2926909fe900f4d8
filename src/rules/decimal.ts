import { Decimal as DecimalJs } from 'decimal.js';

/** A private Decimal so no other code's configuration can change how money is computed. */
export const Decimal = DecimalJs.clone({ precision: 60, rounding: DecimalJs.ROUND_HALF_EVEN, toExpNeg: -100, toExpPos: 100 });
export type Decimal = InstanceType<typeof Decimal>;

const decimalText = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?(e[+-]?[0-9]+)?$/i;

/** A finite decimal from a JSON number or a decimal string, or null when the value is not one. */
export function toDecimal(value: unknown): Decimal | null {
  if (typeof value === 'number') return Number.isFinite(value) ? new Decimal(String(value)) : null;
  if (typeof value === 'string' && decimalText.test(value)) return new Decimal(value);
  return null;
}

/** Plain decimal text without exponent or trailing zeros: "0.27", "16.15", "1". */
export function plain(value: Decimal): string {
  return value.toFixed();
}

const scales = new Map<number, Decimal>();

/** 10^decimals: how many atomic units make one whole unit of a currency. */
export function scale(decimals: number): Decimal {
  let value = scales.get(decimals);
  if (!value) {
    value = new Decimal(10).pow(decimals);
    scales.set(decimals, value);
  }
  return value;
}

export function atomicToAmount(atomic: string | Decimal, decimals: number): string {
  return plain(new Decimal(atomic).dividedBy(scale(decimals)));
}
