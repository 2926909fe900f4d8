import type { ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { flatLineLogger, type Logger } from '../log/index.js';
import { hostPoolReport } from '../hosts/index.js';
import type { Database } from '../store/index.js';
import { clientGone } from './client-gone.js';

const CLIENT_CLOSED_REQUEST = 499;

export interface MetricsOptions {
  gaugeCacheMs?: number;
  hostDownAfterSeconds?: number;
}

/** Prometheus metrics of one instance; gauges read from PostgreSQL when scraped, so they are the same on every instance. */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'],
    registers: [this.registry],
  });
  private readonly latency = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by route and method',
    labelNames: ['route', 'method'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  /** Losing a host (src/hosts/host-monitor.ts): hosts marked down, services moved off them. */
  readonly hostsMarkedDown = new Counter({
    name: 'streaming_hosts_marked_down_total',
    help: 'Streaming hosts marked down after missing their heartbeat',
    registers: [this.registry],
  });
  readonly serviceMoves = new Counter({
    name: 'service_moves_total',
    help: 'Services moved off a lost streaming host',
    registers: [this.registry],
  });
  private readonly series = new Map<string, { count: { inc(): void }; latency: { observe(seconds: number): void } }>();
  /** Icecast's URL-auth callbacks answered by this host, by action, and the time each took. */
  readonly icecastCallbacks = new Histogram({
    name: 'icecast_callback_duration_seconds',
    help: "Icecast URL-auth callbacks answered (Icecast's own callback server), by action",
    labelNames: ['action'],
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1],
    registers: [this.registry],
  });
  readonly quotes = new Counter({
    name: 'quotes_total',
    help: 'Quotes answered, by product',
    labelNames: ['product'],
    registers: [this.registry],
  });
  readonly settlements = new Counter({
    name: 'settlements_total',
    help: 'Settlement attempts by result',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly provisioningFailures = new Counter({
    name: 'provisioning_failures_total',
    help: 'Provisioning attempts that failed (retried by recovery)',
    registers: [this.registry],
  });
  readonly refunds = new Counter({
    name: 'refunds_total',
    help: 'Refund send attempts by result (sent, postponed, error)',
    labelNames: ['result'],
    registers: [this.registry],
  });
  readonly refundWalletShort = new Counter({
    name: 'refund_wallet_short_total',
    help: 'Refunds postponed because the refund wallet lacked USDC or gas',
    labelNames: ['lacks'],
    registers: [this.registry],
  });

  /**
   * The gauges below read PostgreSQL; a scrape within gaugeCacheMs of the last one reuses its rows. The host gauges
   * count a host live while its last heartbeat is within hostDownAfterSeconds, the bound of the host monitor.
   */
  constructor(db: Database, { gaugeCacheMs = 5000, hostDownAfterSeconds = 30 }: MetricsOptions = {}) {
    const registry = this.registry;
    const count = <T extends Record<string, unknown>>(sql: string) => cached(gaugeCacheMs, () => db.query<T>(sql));
    const ordersByState = count<{ state: string; n: number }>(
      'SELECT state, count(*)::int AS n FROM orders GROUP BY state',
    );
    const servicesByStatus = count<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM services GROUP BY status',
    );
    const listeners = count<{ n: number }>('SELECT count(*)::int AS n FROM listeners');
    const awaitingMove = count<{ n: number }>(
      `SELECT count(*)::int AS n FROM services s JOIN streaming_hosts h ON h.id = s.host_id AND h.state = 'down'
        WHERE s.status IN ('pending', 'provisioning', 'active', 'suspended')
          AND (s.expires_at IS NULL OR s.expires_at > now())`,
    );
    new Gauge({
      name: 'services_awaiting_move',
      help: 'Live services on a lost streaming host that no live host had room for yet (tried again every pass)',
      registers: [registry],
      async collect() {
        const [row] = await awaitingMove();
        this.set(row.n);
      },
    });
    hostGauges(
      registry,
      cached(gaugeCacheMs, () => hostPoolReport(db, hostDownAfterSeconds)),
    );
    new Gauge({
      name: 'orders',
      help: 'Orders by state',
      labelNames: ['state'],
      registers: [registry],
      async collect() {
        for (const state of ['settling', 'provisioning', 'active', 'failed', 'refunded']) this.set({ state }, 0);
        for (const row of await ordersByState()) this.set({ state: row.state }, row.n);
      },
    });
    new Gauge({
      name: 'services',
      help: 'Services by status',
      labelNames: ['status'],
      registers: [registry],
      async collect() {
        for (const row of await servicesByStatus()) this.set({ status: row.status }, row.n);
      },
    });
    new Gauge({
      name: 'icecast_listeners',
      help: 'Listeners admitted on Icecast mounts',
      registers: [registry],
      async collect() {
        const [row] = await listeners();
        this.set(row.n);
      },
    });
  }

  /**
   * This host's lease (src/hosts/host-lease.ts), read from memory: a host cut off from PostgreSQL still reports
   * that it lost it.
   */
  watchLease(lease: { readonly held: boolean; readonly losses: number }): void {
    new Gauge({
      name: 'streaming_host_lease_held',
      help: 'Whether this streaming host holds its lease (1) or serves nothing until its heartbeat is written (0)',
      registers: [this.registry],
      collect() {
        this.set(lease.held ? 1 : 0);
      },
    });
    new Counter({
      name: 'streaming_host_lease_losses_total',
      help: 'Times this streaming host lost its lease (no heartbeat written for the lease) and cut its mounts',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(lease.losses);
      },
    });
  }

  /** prom-client hashes the labels on every call; a request's series are looked up by one string instead. */
  private seriesOf(route: string, method: string, status: number) {
    const key = `${status} ${method} ${route}`;
    let series = this.series.get(key);
    if (!series) {
      series = {
        count: this.requests.labels(route, method, String(status)),
        latency: this.latency.labels(route, method),
      };
      if (this.series.size < 1000) this.series.set(key, series);
    }
    return series;
  }

  /** Counts and times a request once answered (started: process.hrtime.bigint() on arrival); logs what is not a plain read. */
  requestRecorder(log: Logger) {
    const requestLog = flatLineLogger(log);
    return (answered: AnsweredRequest, started: bigint): void => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const { route, method, requestId, orderId } = answered;
      // 499 (nginx's "client closed request"): the client left before its answer; not a server error.
      const status = clientGone(answered.res) ? CLIENT_CLOSED_REQUEST : answered.status;
      const series = this.seriesOf(route, method, status);
      series.count.inc();
      series.latency.observe(seconds);
      if (status >= 499 || orderId || method !== 'GET') {
        requestLog.info(
          {
            request_id: requestId,
            method,
            route,
            status,
            ms: Math.round(seconds * 1e5) / 100,
            ...(orderId && { order_id: orderId }),
          },
          'request',
        );
      }
    };
  }
}

/** Per streaming host: places in use and free, and the heartbeat's age (hosts list shows the same). */
function hostGauges(registry: Registry, hosts: () => ReturnType<typeof hostPoolReport>): void {
  new Gauge({
    name: 'streaming_host_places',
    help: 'Stream slots (kind=sources) and listener places (kind=listeners) of each streaming host, in use or free',
    labelNames: ['host', 'kind', 'use'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const h of await hosts()) {
        for (const kind of ['sources', 'listeners'] as const) {
          this.set({ host: h.id, kind, use: 'in_use' }, h.in_use[kind]);
          const total = h.capacity[kind];
          if (total !== null) this.set({ host: h.id, kind, use: 'free' }, Math.max(0, total - h.in_use[kind]));
        }
      }
    },
  });
  new Gauge({
    name: 'streaming_host_heartbeat_age_seconds',
    help: 'Seconds since each streaming host last wrote its heartbeat',
    labelNames: ['host', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const h of await hosts())
        if (h.heartbeat_age_seconds !== null) this.set({ host: h.id, state: h.state }, h.heartbeat_age_seconds);
    },
  });
}

/** What the request log and metrics read of an answered request. */
export interface AnsweredRequest {
  /** The matched route's pattern ("unmatched" when none). */
  route: string;
  method: string;
  status: number;
  res: ServerResponse;
  requestId: string;
  orderId?: string;
}

/** The last result of load for ms milliseconds (a failed load is not kept). */
function cached<T>(ms: number, load: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (!last || performance.now() - last.at > ms) {
      const value = load();
      const entry = { at: performance.now(), value };
      last = entry;
      value.catch(() => {
        if (last === entry) last = undefined;
      });
    }
    return last.value;
  };
}
