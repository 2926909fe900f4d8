import { ApiError } from '../errors/index.js';
import { liveHoldingSql, type StreamLoad } from '../services/index.js';
import type { Client, Database, Row } from '../store/index.js';

/**
 * How long a transaction holding the placement lock may wait on its instance between statements: an instance that
 * froze there (a stopped process, a cut network) would otherwise stop every sale and move of the pool. PostgreSQL
 * ends its session after this, and the lock goes with it.
 */
const PLACEMENT_IDLE_LIMIT_MS = 10_000;

/**
 * The placement lock as the columns of a SELECT, for a statement that takes it along with other locks. One round trip:
 * set_config(..., true) is SET LOCAL, applied before the lock is waited for (left to right).
 */
export const PLACEMENT_LOCK_COLUMNS = `
  set_config('idle_in_transaction_session_timeout', '${PLACEMENT_IDLE_LIMIT_MS}', true),
  pg_advisory_xact_lock(hashtextextended('stream placement', 0))`;

/** Placements and moves of services between hosts wait for each other until the caller's transaction ends. */
export async function lockPlacement(client: Client): Promise<void> {
  await client.query(`SELECT ${PLACEMENT_LOCK_COLUMNS}`);
}

/** A host as placement sees it: what it carries, what is in use and spoken for, when its next service ends. */
export interface PoolHost {
  id: string;
  limits: StreamLoad;
  load: StreamLoad;
  nextExpiry: Date | null;
}

export interface PlacementOptions {
  /** A host whose heartbeat is older than this is not live: nothing is placed on it. */
  downAfterSeconds: number;
  /** The limits of a host that registered none (one sold before hosts registered their capacity). */
  fallbackLimits: StreamLoad;
  /** What paid orders not provisioned yet add, by the host they were placed on (null: placed before hosts were). */
  inFlight: InFlightOrders;
}

/** The paid orders not provisioned yet: the statement that reads them, and what they add by host. */
export interface InFlightOrders {
  sql: string;
  byHost(orders: Row[]): Map<string | null, StreamLoad>;
}

const HOST_COLUMNS = `h.id, h.max_sources, h.max_listeners, held.live_services, held.listener_places, held.next_expiry
  FROM streaming_hosts h CROSS JOIN LATERAL (${liveHoldingSql('host', 'h.id')}) held`;
// Live: taking new services (not draining or down) and beating within the bound.
const LIVE_HOSTS = `SELECT ${HOST_COLUMNS}
  WHERE h.state = 'up' AND h.heartbeat_at > now() - make_interval(secs => $1) ORDER BY h.id`;
const ONE_HOST = `SELECT ${HOST_COLUMNS} WHERE h.id = $1`;

interface HostRow {
  id: string;
  max_sources: number | null;
  max_listeners: number | null;
  live_services: number;
  listener_places: string;
  next_expiry: Date | null;
}

/**
 * Where a new stream goes: any live host with room, the one with the most free listener places (ties: the most free
 * stream slots, then the id). Listener places are what a host spends its bandwidth on, so this spreads the traffic
 * and leaves the largest holes for large orders to come. Checked before the 402 from a count (a second old at most,
 * kept by the caller) and again when the payment is claimed, under one lock for the whole pool: the claim then
 * records the host with the order, so every instance counts it there until its service exists. The pool-wide lock
 * adds no new queue: a claim already appends to the audit chain under its one head lock.
 */
export class HostPlacement {
  constructor(
    private readonly db: Database,
    private readonly options: PlacementOptions,
  ) {}

  /** Placements, and changes of what a placed service carries, wait for each other until the transaction ends. */
  async lock(client: Client): Promise<void> {
    await lockPlacement(client);
  }

  /** Every live host, with what is in use and spoken for on it. */
  async pool(client?: Client): Promise<PoolHost[]> {
    return this.hosts(LIVE_HOSTS, [this.options.downAfterSeconds], client);
  }

  /**
   * pool(), and in the same statement the rows of another read (`sql` with its parameters from $2 on) as JSON: a
   * claim's second read under its locks without a round trip of its own.
   */
  async poolWith(client: Client, beside: [string, unknown[]]): Promise<{ hosts: PoolHost[]; beside: Row[] }> {
    const read: { beside?: Row[] } = {};
    const hosts = await this.hosts(LIVE_HOSTS, [this.options.downAfterSeconds], client, beside, read);
    return { hosts, beside: read.beside ?? [] };
  }

  /** One host whatever its state (an upgrade stays on its service's host), or undefined when it is not registered. */
  async host(id: string, client?: Client): Promise<PoolHost | undefined> {
    return (await this.hosts(ONE_HOST, [id], client))[0];
  }

  /** The host a new stream goes to (see the class); throws 503 capacity_exhausted when none has room. */
  choose(hosts: PoolHost[], demand: StreamLoad): PoolHost {
    const chosen = ranked(hosts).find((h) => fits(h, demand));
    if (!chosen) throw exhausted(hosts, demand);
    return chosen;
  }

  /**
   * The hosts in the order placement tries them: a new stream goes to the first one it fits on, whatever its size
   * (what /availability shows is worked out the same way).
   */
  ranked(hosts: PoolHost[]): PoolHost[] {
    return ranked(hosts);
  }

  /** Throws 503 capacity_exhausted unless `demand` fits on this host (an upgrade or a revival on its own host). */
  admitOn(host: PoolHost, demand: StreamLoad): void {
    if (!fits(host, demand)) throw exhausted([host], demand);
  }

  /**
   * The hosts with the orders in flight on them, read in one statement (one round trip, and one snapshot: an order
   * provisioned meanwhile is counted once, in flight or as its service).
   */
  private async hosts(
    hostsSql: string,
    params: unknown[],
    client?: Client,
    beside?: [string, unknown[]],
    into: { beside?: Row[] } = {},
  ): Promise<PoolHost[]> {
    const besideColumn = beside ? `, (SELECT coalesce(json_agg(b), '[]') FROM (${beside[0]}) b) AS beside` : '';
    const sql = `SELECT (SELECT coalesce(json_agg(o), '[]') FROM (${this.options.inFlight.sql}) o) AS in_flight,
      (SELECT coalesce(json_agg(h ORDER BY h.id), '[]') FROM (${hostsSql}) h) AS hosts${besideColumn}`;
    const all = beside ? [...params, ...beside[1]] : params;
    const [read] = (client ? (await client.query(sql, all)).rows : await this.db.query(sql, all)) as Array<{
      in_flight: Row[];
      hosts: Array<Omit<HostRow, 'next_expiry'> & { next_expiry: string | null }>;
      beside?: Row[];
    }>;
    into.beside = read.beside;
    const rows = read.hosts.map((h) => ({ ...h, next_expiry: h.next_expiry ? new Date(h.next_expiry) : null }));
    return this.withInFlight(rows, this.options.inFlight.byHost(read.in_flight));
  }

  private withInFlight(rows: HostRow[], inFlight: Map<string | null, StreamLoad>): PoolHost[] {
    const unplaced = inFlight.get(null) ?? { sources: 0, listeners: 0 };
    return rows.map((row) => {
      const added = inFlight.get(row.id) ?? { sources: 0, listeners: 0 };
      return {
        id: row.id,
        limits: {
          sources: row.max_sources ?? this.options.fallbackLimits.sources,
          listeners: row.max_listeners ?? this.options.fallbackLimits.listeners,
        },
        // Orders placed before hosts were recorded with them may land on any host: each host counts them.
        load: {
          sources: row.live_services + added.sources + unplaced.sources,
          listeners: Number(row.listener_places) + added.listeners + unplaced.listeners,
        },
        nextExpiry: row.next_expiry,
      };
    });
  }
}

function fits(host: PoolHost, demand: StreamLoad): boolean {
  if (demand.sources > 0 && host.load.sources + demand.sources > host.limits.sources) return false;
  return !(demand.listeners > 0 && host.load.listeners + demand.listeners > host.limits.listeners);
}

const free = (h: PoolHost) => ({
  sources: h.limits.sources - h.load.sources,
  listeners: h.limits.listeners - h.load.listeners,
});

/** Most free listener places first, then most free stream slots, then by id. */
function ranked(hosts: PoolHost[]): PoolHost[] {
  return [...hosts].sort((a, b) => {
    const [fa, fb] = [free(a), free(b)];
    if (fa.listeners !== fb.listeners) return fb.listeners - fa.listeners;
    if (fa.sources !== fb.sources) return fb.sources - fa.sources;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
}

/** No host has room: why, and when to retry: the earliest expiry on any host. */
function exhausted(hosts: PoolHost[], demand: StreamLoad): ApiError {
  return new ApiError(
    503,
    'capacity_exhausted',
    `${whyNoRoom(hosts, demand)}. Nothing was charged. Retry later (places come free as streams expire), or ask for ` +
      'fewer listeners.',
    { retryable: true, headers: { 'Retry-After': String(retryAfterSeconds(hosts)) } },
  );
}

/** What is missing, in the words a single host used: a stream slot anywhere, or the listener places on one host. */
function whyNoRoom(hosts: PoolHost[], demand: StreamLoad): string {
  const sum = (pick: (h: PoolHost) => number) => hosts.reduce((n, h) => n + pick(h), 0);
  const withSlot = hosts.filter((h) => demand.sources === 0 || h.load.sources + demand.sources <= h.limits.sources);
  if (!hosts.length) return 'No streaming host of this deployment is up';
  if (!withSlot.length) return `All ${sum((h) => h.limits.sources)} stream slots of this deployment are taken`;
  if (hosts.length === 1) {
    const [host] = hosts;
    const left = Math.max(0, free(host).listeners);
    return (
      `This deployment has ${left} of its ${host.limits.listeners} listener places free, ` +
      `fewer than the ${demand.listeners} asked`
    );
  }
  const most = Math.max(0, ...withSlot.map((h) => free(h).listeners));
  const all = sum((h) => h.limits.listeners);
  return (
    `No streaming host has the ${demand.listeners} listener places asked free ` +
    `(at most ${most} on one host, of ${all} in all)`
  );
}

/** Seconds until the first service on any host ends (at least 1); 300 when none will, 30 when no host is up. */
function retryAfterSeconds(hosts: PoolHost[]): number {
  if (!hosts.length) return 30;
  const next = Math.min(...hosts.map((h) => h.nextExpiry?.getTime() ?? Number.POSITIVE_INFINITY));
  if (!Number.isFinite(next)) return 300;
  return Math.max(1, Math.ceil((next - Date.now()) / 1000));
}
