import { Decimal } from '../rules/index.js';

const HOUR_MS = 3_600_000;

/**
 * The instant `hours` paid hours after `from`: fractional hours exact (decimal), floored to the whole millisecond an
 * expiry is kept in. Every expiry bought by the hour is computed here: a new service's and an extension's.
 */
export function paidUntil(from: Date | number, hours: number | string): Date {
  const start = typeof from === 'number' ? from : from.getTime();
  return new Date(start + new Decimal(String(hours)).times(HOUR_MS).floor().toNumber());
}

/**
 * A new service's expiry from the time it was paid: its duration_hours when it has one, else a whole calendar month
 * or year for a subscription; null when it has neither (it does not expire).
 */
export function firstExpiry(paidAt: Date, term: { hours: unknown; billing: string }): Date | null {
  if (typeof term.hours === 'number') return paidUntil(paidAt, term.hours);
  const end = new Date(paidAt);
  if (term.billing === 'monthly') end.setUTCMonth(end.getUTCMonth() + 1);
  else if (term.billing === 'annual') end.setUTCFullYear(end.getUTCFullYear() + 1);
  else return null;
  return end;
}
