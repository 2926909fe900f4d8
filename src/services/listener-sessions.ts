import { isIPv4, isIPv6 } from 'node:net';
import type { AccessLogEntry } from '../provisioning/index.js';
import { listenerFacts } from '../stats/index.js';
import type { Client, Database } from '../store/index.js';

export type ListenerProtocol = 'icecast' | 'hls';

export interface NewListenerSession {
  clientId: string;
  ip: string;
  userAgent: string;
  protocol: ListenerProtocol;
}

export interface ListenerSession {
  session_id: string;
  protocol: ListenerProtocol;
  /** The client's network, never its address: a.b.c.0/24 or x:y:z::/48. */
  client_network: string;
  user_agent: string;
  started_at: string;
  ended_at: string | null;
  duration_seconds: number;
  /** Bytes Icecast sent it (headers included), from its access-log line: null until the listener has left. */
  bytes: number | null;
}

export interface ListenerPage {
  current: ListenerSession[];
  recent: ListenerSession[];
  /** Where the next page of recent sessions starts; null on the last. */
  next_cursor: string | null;
}

export interface ListenerAggregates {
  sessions: number;
  average_session_seconds: number | null;
  /** Listener-hours per hour of the day (UTC, index 0 = 00:00–01:00), decimal strings. */
  listener_hours_by_hour: string[];
}

/** How far apart (s) a session's start and its access-log line's connect time may be and still be the same listener. */
const MATCH_WINDOW_SECONDS = 5;
const MAX_AGENT = 400;
/** Where Icecast sees every listener that came through the front door (provisioning/front-door.ts) from. */
const FRONT_DOOR_NETWORK = '127.0.0.0/24';

/** The client's /24 (IPv4) or /48 (IPv6): enough for the owner to see where listeners come from, not who. */
export function clientNetwork(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
  const address = mapped ?? ip;
  if (isIPv4(address)) return `${address.split('.').slice(0, 3).join('.')}.0/24`;
  if (!isIPv6(address)) return 'unknown';
  const [head, tail = ''] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const zeros = Array<string>(8 - left.length - right.length).fill('0');
  const groups = address.includes('::') ? [...left, ...zeros, ...right] : left;
  const network = groups.slice(0, 3).map((g) => (Number.parseInt(g, 16) || 0).toString(16));
  return `${network.join(':')}::/48`;
}

/** How Icecast writes a user agent in its access log (`"`, `\` and non-ASCII bytes become `.`). */
const asLogged = (agent: string) =>
  Buffer.from(agent, 'utf8')
    .toString('latin1')
    .replace(/["\\]|[^\x20-\x7e]/g, '.');

interface SessionRow {
  id: string;
  protocol: ListenerProtocol;
  client_network: string;
  user_agent: string;
  started_at: Date;
  ended_at: Date | null;
  duration_seconds: number | null;
  bytes: string | null;
}

const sessionOf = (row: SessionRow): ListenerSession => ({
  session_id: String(row.id),
  protocol: row.protocol,
  client_network: row.client_network,
  user_agent: row.user_agent,
  started_at: row.started_at.toISOString(),
  ended_at: row.ended_at?.toISOString() ?? null,
  duration_seconds: row.duration_seconds ?? Math.max(0, Math.floor((Date.now() - row.started_at.getTime()) / 1000)),
  bytes: row.bytes === null ? null : Number(row.bytes),
});

const COLUMNS = 'id, protocol, client_network, user_agent, started_at, ended_at, duration_seconds, bytes';

/** Every listener's session (listener_sessions, migration 047): opened at admission, closed when it leaves. */
export class ListenerSessions {
  /** Public: the owner's statistics (src/stats) read the same sessions. */
  constructor(readonly db: Database) {}

  /** Called in the admission's transaction; the session closes when its row in listeners goes (a trigger). */
  static async open(client: Client, serviceId: string, session: NewListenerSession): Promise<void> {
    const agent = session.userAgent.slice(0, MAX_AGENT);
    const facts = await listenerFacts(session.ip, agent);
    await client.query(
      `INSERT INTO listener_sessions
         (service_id, client_id, protocol, client_network, user_agent, country, device_class, platform)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE NOT EXISTS (
         SELECT 1 FROM listener_sessions WHERE service_id = $1 AND client_id = $2 AND ended_at IS NULL)`,
      [
        serviceId,
        session.clientId,
        session.protocol,
        clientNetwork(session.ip),
        agent,
        facts.country,
        facts.device_class,
        facts.platform,
      ],
    );
  }

  /**
   * Gives each finished Icecast listener's access-log line (exact bytes and seconds) to its session: same service,
   * network and user agent, the session whose start is nearest the line's connect time and that has no bytes yet.
   * Behind the front door Icecast logs the front door's loopback address: such a line matches on agent and time.
   */
  static async attribute(client: Client, entries: AccessLogEntry[]): Promise<void> {
    const finished = entries.filter((e) => e.kind === 'listener' && e.status >= 200 && e.status < 300);
    for (const entry of finished) {
      const connectedAt = new Date(entry.endedAt.getTime() - entry.durationSeconds * 1000);
      const { rows } = await client.query(
        `SELECT ls.id, ls.user_agent, abs(extract(epoch FROM ls.started_at - $3::timestamptz)) AS apart
         FROM listener_sessions ls JOIN services s ON s.id = ls.service_id
         WHERE s.mount = $1 AND (ls.client_network = $2 OR $2 = $5) AND ls.protocol = 'icecast' AND ls.bytes IS NULL
           AND ls.started_at BETWEEN $3::timestamptz - make_interval(secs => $4)
                                 AND $3::timestamptz + make_interval(secs => $4)
         ORDER BY apart, ls.id FOR UPDATE OF ls`,
        [entry.mount, clientNetwork(entry.ip), connectedAt, MATCH_WINDOW_SECONDS, FRONT_DOOR_NETWORK],
      );
      const candidates = rows as { id: string; user_agent: string }[];
      const match = candidates.find((r) => asLogged(r.user_agent) === entry.userAgent);
      if (!match) continue;
      await client.query(
        `UPDATE listener_sessions SET bytes = $2, duration_seconds = $3, ended_at = coalesce(ended_at, $4)
         WHERE id = $1`,
        [match.id, entry.bytes, entry.durationSeconds, entry.endedAt],
      );
    }
  }

  /** Connected listeners, and finished sessions newest first, `limit` a page, continuing before `cursor`. */
  async page(serviceId: string, limit: number, cursor?: string): Promise<ListenerPage> {
    const current = await this.db.query<SessionRow & Record<string, unknown>>(
      `SELECT ${COLUMNS} FROM listener_sessions WHERE service_id = $1 AND ended_at IS NULL
       ORDER BY id DESC LIMIT 1000`,
      [serviceId],
    );
    const recent = await this.db.query<SessionRow & Record<string, unknown>>(
      `SELECT ${COLUMNS} FROM listener_sessions
       WHERE service_id = $1 AND ended_at IS NOT NULL AND ($2::bigint IS NULL OR id < $2)
       ORDER BY id DESC LIMIT $3`,
      [serviceId, cursor ?? null, limit + 1],
    );
    const shown = recent.slice(0, limit);
    return {
      current: current.map(sessionOf),
      recent: shown.map(sessionOf),
      next_cursor: recent.length > limit ? String(shown.at(-1)!.id) : null,
    };
  }

  async aggregates(serviceId: string): Promise<ListenerAggregates> {
    const [totals] = await this.db.query<{ sessions: number; average: string | null }>(
      `SELECT count(*)::int AS sessions,
         round(avg(seconds) FILTER (WHERE ended_at IS NOT NULL)::numeric, 1)::text AS average
       FROM listener_listening WHERE service_id = $1`,
      [serviceId],
    );
    // Each session's listening time (the view listener_listening, migration 063) split over the UTC hours it spans
    // (g.t: the hour's start as UTC wall time, h: the same instant).
    const byHour = await this.db.query<{ hour: number; hours: string }>(
      `SELECT extract(hour FROM g.t)::int AS hour,
         round(sum(extract(epoch FROM
           least(ls.listened_until, h + interval '1 hour') - greatest(ls.started_at, h))) / 3600, 6
         )::text AS hours
       FROM listener_listening ls,
         generate_series(date_trunc('hour', ls.started_at AT TIME ZONE 'UTC'),
                         ls.listened_until AT TIME ZONE 'UTC', interval '1 hour') g(t),
         LATERAL (SELECT g.t AT TIME ZONE 'UTC' AS h) hh
       WHERE ls.service_id = $1 GROUP BY 1`,
      [serviceId],
    );
    const hours = Array.from({ length: 24 }, () => '0');
    for (const row of byHour) hours[row.hour] = row.hours;
    return {
      sessions: totals.sessions,
      average_session_seconds: totals.average === null ? null : Number(totals.average),
      listener_hours_by_hour: hours,
    };
  }
}
