import { DIMENSIONS, type ServiceStats } from './stats-document.js';

export const CSV_COLUMNS = [
  'date',
  'dimension',
  'key',
  'unique_listeners',
  'sessions',
  'listening_hours',
  'average_listening_seconds',
  'peak_listeners',
  'peak_at',
] as const;

/**
 * One field as RFC 4180 CSV; text a spreadsheet would run as a formula (=, +, -, @ first) is prefixed with an
 * apostrophe: titles come from encoders the owner does not control.
 */
function field(value: string | number | null): string {
  if (value === null) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * The statistics as CSV, one row per day and figure: dimension "total" (every column), then one row per protocol,
 * device_class, platform and country (listeners and hours), and per track ("track", key "artist - title", listeners).
 */
export function statsCsv(stats: ServiceStats): string {
  const rows: (string | number | null)[][] = [[...CSV_COLUMNS]];
  for (const day of stats.days) {
    rows.push([
      day.date,
      'total',
      '',
      day.unique_listeners,
      day.sessions,
      day.listening_hours,
      day.average_listening_seconds,
      day.peak_listeners,
      day.peak_at,
    ]);
    for (const dimension of DIMENSIONS)
      for (const b of day[`by_${dimension}`])
        rows.push([day.date, dimension, b.key, b.unique_listeners, null, b.listening_hours, null, null, null]);
    for (const t of day.top_tracks)
      rows.push([
        day.date,
        'track',
        t.artist ? `${t.artist} - ${t.title}` : t.title,
        t.listeners,
        null,
        null,
        null,
        null,
        null,
      ]);
  }
  return `${rows.map((row) => row.map(field).join(',')).join('\r\n')}\r\n`;
}
