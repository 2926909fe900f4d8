import { ApiError } from '../errors/index.js';
import type { DayRange } from './stats-queries.js';

/** The most days one request may cover. */
export const MAX_DAYS = 92;
const DAY_MS = 86_400_000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

const invalid = (message: string) => new ApiError(400, 'invalid_stats_query', message);

/** A valid calendar date as YYYY-MM-DD, or undefined. */
function dateOf(text: string): number | undefined {
  if (!DATE.test(text)) return undefined;
  const ms = Date.parse(`${text}T00:00:00Z`);
  return Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 10) !== text ? undefined : ms;
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * from, to (UTC dates, to included; by default the last 7 days up to today) and group (day, the only grouping) of a
 * stats request.
 */
export function statsRange(query: Record<string, string | string[] | undefined>, now = Date.now()): DayRange {
  const one = (name: string) => {
    const value = query[name];
    if (Array.isArray(value)) throw invalid(`Give ${name} once.`);
    return value;
  };
  const group = one('group');
  if (group !== undefined && group !== 'day') throw invalid('group must be day (figures per UTC day).');
  const parse = (name: string, fallback: number) => {
    const text = one(name);
    if (text === undefined || text === '') return fallback;
    const ms = dateOf(text);
    if (ms === undefined) throw invalid(`${name} must be a date as YYYY-MM-DD (UTC), got "${text.slice(0, 40)}".`);
    return ms;
  };
  const to = parse('to', Date.parse(`${day(now)}T00:00:00Z`));
  const from = parse('from', to - 6 * DAY_MS);
  if (from > to) throw invalid('from must not be after to.');
  if ((to - from) / DAY_MS + 1 > MAX_DAYS) throw invalid(`Ask for at most ${MAX_DAYS} days at once.`);
  return { from: day(from), to: day(to) };
}

/** Every date of the range, in order. */
export function daysOf(range: DayRange): string[] {
  const days: string[] = [];
  for (let ms = Date.parse(`${range.from}T00:00:00Z`); day(ms) <= range.to; ms += DAY_MS) days.push(day(ms));
  return days;
}
