import { toDecimal } from './decimal.js';

type Comparison = (order: number) => boolean;

const comparisons: Record<string, Comparison> = {
  decimalEqual: (o) => o === 0,
  decimalNotEqual: (o) => o !== 0,
  decimalLessThan: (o) => o < 0,
  decimalLessThanInclusive: (o) => o <= 0,
  decimalGreaterThan: (o) => o > 0,
  decimalGreaterThanInclusive: (o) => o >= 0,
};

/**
 * Money and quantities are compared as decimals, never as JavaScript numbers; a value that is not a decimal never
 * matches.
 */
export function compareDecimal(operator: string, left: unknown, right: unknown): boolean {
  const a = toDecimal(left);
  const b = toDecimal(right);
  if (!a || !b) return false;
  return comparisons[operator](a.comparedTo(b));
}

export const decimalOperators = Object.keys(comparisons);

export const builtInOperators = [
  'equal',
  'notEqual',
  'in',
  'notIn',
  'contains',
  'doesNotContain',
  'lessThan',
  'lessThanInclusive',
  'greaterThan',
  'greaterThanInclusive',
];

export const knownOperators = new Set([...builtInOperators, ...decimalOperators]);
