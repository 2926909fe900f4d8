import { Decimal } from 'decimal.js';
import type { Database } from '../store/index.js';
import { daysOf } from './stats-range.js';
import { StatsQueries, type DayRange, type FigureRow, type PeakRow, type TrackRow } from './stats-queries.js';

/** How many tracks each day lists. */
const TOP_TRACKS = 10;
export const DIMENSIONS = ['protocol', 'device_class', 'platform', 'country'] as const;
export type Dimension = (typeof DIMENSIONS)[number];

export interface Breakdown {
  key: string;
  unique_listeners: number;
  listening_hours: string;
}

export interface Figures {
  unique_listeners: number;
  sessions: number;
  listening_hours: string;
  average_listening_seconds: number | null;
  peak_listeners: number;
  peak_at: string | null;
}

export interface DayStats extends Figures {
  date: string;
  by_protocol: Breakdown[];
  by_device_class: Breakdown[];
  by_platform: Breakdown[];
  by_country: Breakdown[];
  top_tracks: { title: string; artist: string | null; listeners: number }[];
}

export interface ServiceStats {
  service_id: string;
  group: 'day';
  time_zone: 'UTC';
  from: string;
  to: string;
  totals: Figures;
  days: DayStats[];
}

const hoursOf = (seconds: Decimal.Value) => new Decimal(seconds).dividedBy(3600).toDecimalPlaces(6).toFixed();
const averageOf = (seconds: Decimal.Value, listeners: number) =>
  listeners ? new Decimal(seconds).dividedBy(listeners).toDecimalPlaces(1).toNumber() : null;

/** A service's listener statistics per UTC day of the range (see docs/stations.md, Listener statistics). */
export async function serviceStats(db: Database, serviceId: string, range: DayRange): Promise<ServiceStats> {
  const queries = new StatsQueries(db);
  const [figures, peaks, tracks, totals] = await Promise.all([
    queries.figures(serviceId, range),
    queries.peaks(serviceId, range),
    queries.tracks(serviceId, range),
    queries.totals(serviceId, range),
  ]);
  const days = daysOf(range).map((date) => dayStats(date, figures, peaks, tracks));
  const seconds = figures.filter((f) => f.dimension === null).reduce((sum, f) => sum.plus(f.seconds), new Decimal(0));
  const busiest = days.reduce<DayStats | undefined>(
    (top, d) => (d.peak_listeners > (top?.peak_listeners ?? 0) ? d : top),
    undefined,
  );
  return {
    service_id: serviceId,
    group: 'day',
    time_zone: 'UTC',
    ...range,
    totals: {
      unique_listeners: totals.listeners,
      sessions: totals.sessions,
      listening_hours: hoursOf(seconds),
      average_listening_seconds: averageOf(seconds, totals.listeners),
      peak_listeners: busiest?.peak_listeners ?? 0,
      peak_at: busiest?.peak_at ?? null,
    },
    days,
  };
}

function dayStats(date: string, figures: FigureRow[], peaks: PeakRow[], tracks: TrackRow[]): DayStats {
  const rows = figures.filter((f) => f.day === date);
  const total = rows.find((f) => f.dimension === null);
  const peak = peaks.find((p) => p.day === date);
  const seconds = total?.seconds ?? '0';
  const by = (dimension: Dimension): Breakdown[] =>
    rows
      .filter((f) => f.dimension === dimension)
      .map((f) => ({ key: f.key ?? 'unknown', unique_listeners: f.listeners, listening_hours: hoursOf(f.seconds) }))
      .sort((a, b) => b.unique_listeners - a.unique_listeners || a.key.localeCompare(b.key));
  return {
    date,
    unique_listeners: total?.listeners ?? 0,
    sessions: total?.sessions ?? 0,
    listening_hours: hoursOf(seconds),
    average_listening_seconds: averageOf(seconds, total?.listeners ?? 0),
    peak_listeners: peak?.peak ?? 0,
    peak_at: peak && peak.peak > 0 ? peak.peak_at.toISOString() : null,
    by_protocol: by('protocol'),
    by_device_class: by('device_class'),
    by_platform: by('platform'),
    by_country: by('country'),
    top_tracks: tracks
      .filter((t) => t.day === date)
      .slice(0, TOP_TRACKS)
      .map(({ title, artist, listeners }) => ({ title, artist, listeners })),
  };
}
