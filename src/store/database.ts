import pg from 'pg';
import { ApiError } from '../errors/index.js';

export type Row = Record<string, unknown>;
export type Client = pg.PoolClient;

/** Class 08 (connection), 57P (shutdown), 53 (resources): the database is away, the request may be retried. */
const unavailableCodes = /^(08|57P|53)/;

export class Database {
  private readonly pool: pg.Pool;

  /**
   * `timeoutMs` bounds each query and each new connection on this client's side (a partitioned network fails
   * nothing: PostgreSQL's own statement_timeout never reaches the client); a query that runs out closes its
   * connection. Without it, connecting may take 5 s and a query as long as it takes.
   */
  constructor(
    readonly url: string,
    options: { max?: number; timeoutMs?: number } = {},
  ) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.max ?? 20,
      connectionTimeoutMillis: options.timeoutMs ?? 5000,
      ...(options.timeoutMs && { query_timeout: options.timeoutMs }),
    });
    this.pool.on('error', () => {
      /* an idle client lost its connection; the next query reconnects */
    });
  }

  private readonly statementNames = new Map<string, string>();
  private statementsNamed = 0;

  /**
   * A statement with parameters is prepared once per connection under a name, then only bound and run: PostgreSQL
   * does not parse and plan it again, which is most of its work for the small queries of a request.
   */
  async query<T extends Row = Row>(sql: string, params: unknown[] = []): Promise<T[]> {
    const name = params.length > 0 ? this.statementName(sql) : undefined;
    try {
      return (await this.pool.query({ name, text: sql, values: params })).rows as T[];
    } catch (e) {
      // 0A000 "cached plan must not change result type": another instance migrated a table since it was prepared.
      // Run it unprepared now, and prepare it afresh under a new name next time.
      if (name && (e as { code?: string }).code === '0A000') {
        this.statementNames.delete(sql);
        try {
          return (await this.pool.query(sql, params)).rows as T[];
        } catch (again) {
          throw translate(again);
        }
      }
      throw translate(e);
    }
  }

  /** Names for at most 500 distinct statements (the code has a few dozen); any beyond run unnamed. */
  private statementName(sql: string): string | undefined {
    let name = this.statementNames.get(sql);
    if (!name && this.statementNames.size < 500) {
      name = `s${++this.statementsNamed}`;
      this.statementNames.set(sql, name);
    }
    return name;
  }

  async transaction<T>(work: (client: Client) => Promise<T>): Promise<T> {
    const client = await this.dedicated();
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await work(this.preparing(client));
      await client.query('COMMIT');
      return result;
    } catch (e) {
      // A statement given up (timeoutMs) still waits for its answer on the connection, and so would a ROLLBACK:
      // the connection is closed instead (PostgreSQL then rolls back), not handed to the next caller.
      if (timedOut(e)) broken = e;
      else
        await client.query('ROLLBACK').catch((err: unknown) => {
          broken = err;
        });
      throw translate(e);
    } finally {
      client.release(broken as Error | undefined);
    }
  }

  /**
   * The connection of a transaction, whose statements with parameters are prepared by name as query() does: a paid
   * order's claim and settlement are a few large statements, which PostgreSQL otherwise parses and plans every time.
   * A statement whose plan went stale (0A000, see query()) fails its transaction, and is prepared afresh next time.
   */
  private preparing(client: Client): Client {
    const named = (text: unknown, params?: unknown, ...rest: unknown[]) => {
      if (typeof text !== 'string' || !Array.isArray(params) || !params.length || rest.length) {
        return (client.query as (...args: unknown[]) => unknown)(text, params, ...rest);
      }
      return client.query({ name: this.statementName(text), text, values: params }).catch((e: unknown) => {
        if ((e as { code?: string }).code === '0A000') this.statementNames.delete(text);
        throw e;
      });
    };
    return new Proxy(client, {
      get(target, property) {
        if (property === 'query') return named;
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  /** A connection of its own, for session state such as an advisory lock held while this instance lives. */
  async dedicated(): Promise<Client> {
    try {
      return survivesLoss(await this.pool.connect());
    } catch (e) {
      throw translate(e);
    }
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

const watched = new WeakSet<pg.PoolClient>();

/**
 * A connection lost while checked out (PostgreSQL restarted, the network reset it) fails the queries on it, which
 * callers handle; pg also emits 'error' on the client, which would end the process if nobody listened.
 */
function survivesLoss(client: pg.PoolClient): pg.PoolClient {
  if (!watched.has(client)) {
    client.on('error', () => undefined);
    watched.add(client);
  }
  return client;
}

/** pg's answer when a query ran past `timeoutMs` (query_timeout): the connection may have gone silent. */
export function timedOut(e: unknown): boolean {
  return e instanceof Error && e.message === 'Query read timeout';
}

function translate(e: unknown): unknown {
  if (e instanceof ApiError) return e;
  const err = e as { code?: string; message?: string };
  const connectionLost =
    (err.code !== undefined &&
      (unavailableCodes.test(err.code) || /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT)$/.test(err.code))) ||
    /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/.test(
      err.message ?? '',
    ) ||
    timedOut(e);
  // A prepared plan gone stale inside a transaction (see preparing): rolled back, prepared afresh on the next try.
  const stalePlan = err.code === '0A000' && /cached plan must not change result type/.test(err.message ?? '');
  if (connectionLost || stalePlan) {
    return new ApiError(
      503,
      'store_unavailable',
      'The database is unavailable for a moment. Nothing was changed: retry the same request (with the same Idempotency-Key) in a few seconds.',
      { retryable: true, retryAfterSeconds: 2 },
    );
  }
  return e;
}
