import type { Logger } from '../log/index.js';
import type { Client, Database } from '../store/index.js';
import { PeriodicTask } from '../tasks/index.js';
import {
  fits,
  hostLoad,
  HOLDS_A_PLACE,
  moveService,
  type Destination,
  type InFlightLoad,
  type MoveOutcome,
  type Stranded,
} from './service-moves.js';

export interface HostMonitorOptions {
  /** A host whose heartbeat is older than this is down (HOST_DOWN_AFTER_SECONDS). */
  downAfterSeconds: number;
  intervalMs: number;
  /** The paid orders not provisioned yet, by host: a move does not take the places they were promised. */
  inFlight?: InFlightLoad;
  /** Told after each pass that did something (metrics). */
  onPass?: (pass: MonitorPass) => void;
}

/** What one pass did: hosts it marked down, services it moved, and those left where they are for want of room. */
export interface MonitorPass {
  markedDown: string[];
  moved: MoveOutcome[];
  stranded: number;
}

/** At most this many services are moved per pass; the next pass goes on with the rest. */
const MOVES_PER_PASS = 500;

/**
 * Watches the pool of streaming hosts from every instance, one pass at a time across instances (a PostgreSQL advisory
 * lock): marks down the hosts that missed their heartbeat for HOST_DOWN_AFTER_SECONDS (placement then skips them),
 * and moves their live services to live hosts with room. A service that fits nowhere stays and is tried again on the
 * next pass (logged, and counted in services_awaiting_move).
 */
export class HostMonitor {
  private readonly task: PeriodicTask;
  /** Since when this instance has reached PostgreSQL without a failed pass (see mayMarkDown). */
  private reachableSince?: number;

  constructor(
    private readonly db: Database,
    private readonly log: Logger,
    private readonly options: HostMonitorOptions,
  ) {
    this.task = new PeriodicTask('host monitor', () => this.pass(), { intervalMs: options.intervalMs, log });
  }

  start(): void {
    this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  /** One pass, or nothing when another instance runs one now. */
  async pass(): Promise<MonitorPass | undefined> {
    const work = await this.work().catch((err) => {
      this.reachableSince = undefined;
      throw err;
    });
    this.reachableSince ??= Date.now();
    if (!(work.late && this.mayMarkDown()) && !work.stranded) return { markedDown: [], moved: [], stranded: 0 };
    return this.lockedPass();
  }

  /**
   * Whether a pass has anything to do, in one statement on any connection: a host up with a heartbeat past the bound,
   * or a live service on a host down. At rest that is all a pass asks; the lock and the work follow only when it has.
   */
  private async work(): Promise<{ late: boolean; stranded: boolean }> {
    const [row] = await this.db.query<{ late: boolean; stranded: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM streaming_hosts
                       WHERE state <> 'down' AND heartbeat_at < now() - make_interval(secs => $1)) AS late,
              EXISTS (SELECT 1 FROM services s JOIN streaming_hosts h ON h.id = s.host_id
                       WHERE h.state = 'down' AND s.${HOLDS_A_PLACE} AND (s.expires_at IS NULL OR s.expires_at > now()))
                AS stranded`,
      [this.options.downAfterSeconds],
    );
    return row;
  }

  private async lockedPass(): Promise<MonitorPass | undefined> {
    const connection = await this.db.dedicated().catch((err) => {
      this.reachableSince = undefined;
      throw err;
    });
    let locked = false;
    let broken = false;
    try {
      // The lock is held by this session: were this instance to freeze holding it (a stopped process, a cut
      // network), PostgreSQL ends the session once it has been idle for the bound, and another instance takes over.
      await connection.query(`SET idle_session_timeout = ${this.options.downAfterSeconds * 1000}`);
      locked = await tryLock(connection);
      this.reachableSince ??= Date.now();
      if (!locked) return undefined;
      const markedDown = this.mayMarkDown() ? await this.markDown(connection) : [];
      const { moved, stranded } = await this.moveStranded(connection);
      const pass = { markedDown, moved, stranded };
      if (markedDown.length || moved.length || stranded) this.options.onPass?.(pass);
      return pass;
    } catch (err) {
      this.reachableSince = undefined;
      broken = true;
      throw err;
    } finally {
      if (locked) await connection.query(`SELECT pg_advisory_unlock(${MONITOR_LOCK})`).catch(() => {});
      await connection.query('RESET idle_session_timeout').catch(() => {
        broken = true;
      });
      // A session that failed or was ended is not handed out again.
      connection.release(broken);
    }
  }

  /**
   * After PostgreSQL was unreachable (or this instance just started), every host's heartbeat may be old only because
   * no host could write it: hosts are marked down only once this instance has reached PostgreSQL for the whole bound,
   * time enough for every live host to beat again. Services of hosts already down keep moving meanwhile.
   */
  private mayMarkDown(): boolean {
    return (
      this.reachableSince !== undefined && Date.now() - this.reachableSince >= this.options.downAfterSeconds * 1000
    );
  }

  private async markDown(connection: Client): Promise<string[]> {
    // Hosts that never beat (addresses adopted from before migration 049) are not watched.
    const { rows } = await connection.query(
      `UPDATE streaming_hosts SET state = 'down', down_since = now(), updated_at = now()
        WHERE state <> 'down' AND heartbeat_at < now() - make_interval(secs => $1)
        RETURNING id, heartbeat_at`,
      [this.options.downAfterSeconds],
    );
    for (const host of rows)
      this.log.warn({ host_id: host.id, heartbeat_at: host.heartbeat_at }, 'streaming host missed its heartbeat: down');
    return rows.map((h) => h.id as string);
  }

  private async moveStranded(connection: Client): Promise<{ moved: MoveOutcome[]; stranded: number }> {
    const { rows } = await connection.query(
      `SELECT s.id, s.host_id, s.host_epoch, listener_places(s.limits)::int AS listener_places
         FROM services s JOIN streaming_hosts h ON h.id = s.host_id
        WHERE h.state = 'down' AND s.${HOLDS_A_PLACE} AND (s.expires_at IS NULL OR s.expires_at > now())
        ORDER BY s.expires_at DESC NULLS FIRST LIMIT ${MOVES_PER_PASS}`,
    );
    if (!rows.length) return { moved: [], stranded: 0 };
    const destinations = await this.destinations(connection);
    const moved: MoveOutcome[] = [];
    for (const row of rows) {
      const service: Stranded = {
        id: row.id,
        fromHost: row.host_id,
        hostEpoch: row.host_epoch,
        listenerPlaces: row.listener_places,
      };
      const done = await this.moveToRoomiest(service, destinations);
      if (done) moved.push(done);
    }
    const stranded = rows.length - moved.length;
    for (const done of moved)
      this.log.info(
        { service_id: done.serviceId, from: done.fromHost, to: done.toHost, credited_seconds: done.creditedSeconds },
        'service moved off a lost host',
      );
    if (stranded)
      this.log.warn({ stranded }, 'services of lost hosts fit on no live host; they stay and are tried again');
    return { moved, stranded };
  }

  /** Live hosts (up, with a fresh heartbeat) and what they carry now, most free listener places first. */
  private async destinations(connection: Client): Promise<Destination[]> {
    const { rows } = await connection.query(
      `SELECT id, public_url, max_sources, max_listeners FROM streaming_hosts
        WHERE state = 'up' AND heartbeat_at >= now() - make_interval(secs => $1)`,
      [this.options.downAfterSeconds],
    );
    const inFlight = await this.options.inFlight?.(connection);
    const hosts: Destination[] = [];
    for (const row of rows) {
      const load = await hostLoad(connection, row.id, inFlight);
      hosts.push({
        id: row.id,
        publicUrl: row.public_url,
        maxSources: row.max_sources,
        maxListeners: row.max_listeners,
        ...load,
      });
    }
    return hosts;
  }

  /** Tries the hosts it fits on, most free listener places first; the winner's load is counted for the next one. */
  private async moveToRoomiest(service: Stranded, hosts: Destination[]): Promise<MoveOutcome | undefined> {
    const free = (h: Destination) => (h.maxListeners ?? Number.MAX_SAFE_INTEGER) - h.listeners;
    const candidates = hosts.filter((h) => fits(h, service.listenerPlaces)).sort((a, b) => free(b) - free(a));
    for (const host of candidates) {
      const done = await this.db
        .transaction((client) => moveService(client, service, host, this.options.inFlight))
        .catch((err) => {
          this.log.warn({ err, service_id: service.id, to: host.id }, 'could not move a service; tried again');
          return undefined;
        });
      if (done) {
        host.sources += 1;
        host.listeners += service.listenerPlaces;
        return done;
      }
    }
    return undefined;
  }
}

/** One key for the whole pool: a pass runs on one instance at a time. */
const MONITOR_LOCK = "hashtextextended('streaming host monitor', 0)";

async function tryLock(connection: Client): Promise<boolean> {
  const {
    rows: [{ locked }],
  } = await connection.query(`SELECT pg_try_advisory_lock(${MONITOR_LOCK}) AS locked`);
  return locked === true;
}
