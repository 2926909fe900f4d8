import type { Database } from '../store/index.js';

/** The days asked for, UTC, `to` included, as YYYY-MM-DD. */
export interface DayRange {
  from: string;
  to: string;
}

// Each session's listening time (the view listener_listening, migration 063) cut into its parts within each UTC day
// of the range: s and e are a part's start and end, `who` the listener (its network and user agent).
const PIECES = `pieces AS (
  SELECT d.day, ls.id, ls.protocol, ls.country, ls.device_class, ls.platform,
    ls.client_network || ' ' || ls.user_agent AS who,
    greatest(ls.started_at, d.day_start) AS s, least(ls.listened_until, d.day_start + interval '1 day') AS e
  FROM listener_listening ls,
    generate_series(greatest(date_trunc('day', ls.started_at AT TIME ZONE 'UTC'), $2::date::timestamp),
                    least(ls.listened_until AT TIME ZONE 'UTC', $3::date::timestamp), interval '1 day') g(t),
    LATERAL (SELECT to_char(g.t, 'YYYY-MM-DD') AS day, g.t AT TIME ZONE 'UTC' AS day_start) d
  WHERE ls.service_id = $1
    AND ls.started_at < ($3::date + 1)::timestamp AT TIME ZONE 'UTC'
    AND ls.listened_until >= $2::date::timestamp AT TIME ZONE 'UTC'
    -- a session that ends at midnight has no part in the next day; one of no time at all still counts once
    AND (least(ls.listened_until, d.day_start + interval '1 day') > greatest(ls.started_at, d.day_start)
         OR ls.seconds = 0))`;

export interface FigureRow {
  day: string;
  /** null: the day's total; else which breakdown `key` belongs to. */
  dimension: 'protocol' | 'device_class' | 'platform' | 'country' | null;
  key: string | null;
  listeners: number;
  sessions: number;
  seconds: string;
}

export interface PeakRow {
  day: string;
  peak: number;
  peak_at: Date;
}

export interface TrackRow {
  day: string;
  title: string;
  artist: string | null;
  listeners: number;
}

/** The SQL that reads a service's listener statistics per UTC day. */
export class StatsQueries {
  constructor(private readonly db: Database) {}

  /** Per day: listeners, sessions and seconds, in total and by protocol, device class, platform and country. */
  figures(serviceId: string, range: DayRange): Promise<FigureRow[]> {
    return this.db.query<FigureRow & Record<string, unknown>>(
      `WITH ${PIECES}
       SELECT day,
         CASE WHEN grouping(protocol) = 0 THEN 'protocol' WHEN grouping(device_class) = 0 THEN 'device_class'
              WHEN grouping(platform) = 0 THEN 'platform' WHEN grouping(country) = 0 THEN 'country' END AS dimension,
         coalesce(protocol, device_class, platform, country) AS key,
         count(DISTINCT who)::int AS listeners, count(DISTINCT id)::int AS sessions,
         sum(extract(epoch FROM e - s))::text AS seconds
       FROM pieces
       GROUP BY GROUPING SETS ((day), (day, protocol), (day, device_class), (day, platform), (day, country))
       ORDER BY day`,
      [serviceId, range.from, range.to],
    );
  }

  /** The range's distinct listeners and sessions (a listener of several days counts once). */
  async totals(serviceId: string, range: DayRange): Promise<{ listeners: number; sessions: number }> {
    const [row] = await this.db.query<{ listeners: number; sessions: number }>(
      `WITH ${PIECES} SELECT count(DISTINCT who)::int AS listeners, count(DISTINCT id)::int AS sessions FROM pieces`,
      [serviceId, range.from, range.to],
    );
    return row;
  }

  /** Each day's most listeners at once, and the first moment it had them. */
  peaks(serviceId: string, range: DayRange): Promise<PeakRow[]> {
    return this.db.query<PeakRow & Record<string, unknown>>(
      `WITH ${PIECES},
       events AS (SELECT day, s AS t, 1 AS d FROM pieces UNION ALL SELECT day, e, -1 FROM pieces),
       running AS (SELECT day, t, sum(d) OVER (PARTITION BY day ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n
                   FROM events)
       SELECT DISTINCT ON (day) day, n::int AS peak, t AS peak_at FROM running ORDER BY day, n DESC, t`,
      [serviceId, range.from, range.to],
    );
  }

  /** Per day, the tracks played while listeners listened, with how many different listeners heard each. */
  tracks(serviceId: string, range: DayRange): Promise<TrackRow[]> {
    return this.db.query<TrackRow & Record<string, unknown>>(
      `WITH ${PIECES},
       tracks AS (SELECT title, artist, started_at AS ts,
                    coalesce(lead(started_at) OVER (ORDER BY id), now()) AS te
                  FROM now_playing WHERE service_id = $1)
       SELECT p.day, t.title, t.artist, count(DISTINCT p.who)::int AS listeners
       FROM pieces p JOIN tracks t ON p.s < t.te AND p.e > t.ts
       GROUP BY p.day, t.title, t.artist
       ORDER BY p.day, listeners DESC, t.title`,
      [serviceId, range.from, range.to],
    );
  }
}
