import { Decimal as DecimalJs } from 'decimal.js';

/** A private Decimal so no other code's configuration can change how money is computed. */
export const Decimal = DecimalJs.clone({
  precision: 60,
  rounding: DecimalJs.ROUND_HALF_EVEN,
  toExpNeg: -100,
  toExpPos: 100,
});
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

const wholeAtomic = /^(0|[1-9][0-9]{0,59})$/;

export function atomicToAmount(atomic: string | Decimal, decimals: number): string {
  // A whole number of at most 60 digits (the precision) divides exactly: moving the point gives the same text.
  if (
    typeof atomic === 'string' &&
    Number.isInteger(decimals) &&
    decimals >= 0 &&
    decimals <= 100 &&
    wholeAtomic.test(atomic)
  )
    return movePoint(atomic, decimals);
  return plain(new Decimal(atomic).dividedBy(scale(decimals)));
}

/** digits / 10^decimals as plain decimal text without trailing zeros. */
function movePoint(digits: string, decimals: number): string {
  if (decimals === 0) return digits;
  const padded = digits.padStart(decimals + 1, '0');
  const whole = padded.slice(0, padded.length - decimals);
  const fraction = padded.slice(padded.length - decimals).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}
