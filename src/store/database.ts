import pg from 'pg';
import { ApiError } from '../errors/index.js';

export type Row = Record<string, unknown>;
export type Client = pg.PoolClient;

/**
 * Class 08 (connection), 57P (shutdown), 53 (resources), 57014 (a statement canceled, as statement_timeout does):
 * the database is away or slow, the request may be retried.
 */
const unavailableCodes = /^(08|57P|57014|53)/;

/** A bounded pool's transaction may sit idle between its statements this many query bounds before it is ended. */
const IDLE_IN_TRANSACTION_FACTOR = 3;

export class Database {
  private readonly pool: pg.Pool;

  /**
   * `timeoutMs` bounds each query and each new connection on this client's side (a partitioned network fails
   * nothing: PostgreSQL's own statement_timeout never reaches the client); a query that runs out closes its
   * connection. PostgreSQL gets the same bound (statement_timeout): a statement waiting on a lock when its client
   * gave up would otherwise keep its session until the lock is granted, and a pool that opens a new connection
   * for each one it gave up would pile them up to max_connections. A transaction whose client went silent between
   * two statements (a partition) would hold its row locks until TCP gave up, minutes later, and every stop or move
   * of those services would wait on it: PostgreSQL ends it after a few bounds
   * (idle_in_transaction_session_timeout). Without it, connecting may take 5 s and a
   * query as long as it takes. `name` is the connections'
   * application_name: pg_stat_activity tells which pool of which process a session belongs to.
   */
  constructor(
    readonly url: string,
    options: { max?: number; timeoutMs?: number; name?: string } = {},
  ) {
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.max ?? 20,
      connectionTimeoutMillis: options.timeoutMs ?? 5000,
      ...(options.timeoutMs && {
        query_timeout: options.timeoutMs,
        statement_timeout: options.timeoutMs,
        idle_in_transaction_session_timeout: options.timeoutMs * IDLE_IN_TRANSACTION_FACTOR,
      }),
      ...(options.name && { application_name: options.name }),
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
          throw changesRows(sql) ? translateUnanswered(again) : translate(again);
        }
      }
      throw changesRows(sql) ? translateUnanswered(e) : translate(e);
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

  /**
   * Runs `work` in a transaction. `opening`, a first statement whose parameters are text (or null), is sent in the
   * same message as BEGIN, its parameters written into it as quoted literals: one round trip less, for a statement
   * cheap to plan (a lock); its rows go to `work`.
   */
  async transaction<T>(
    work: (client: Client, opened: Row[]) => Promise<T>,
    opening?: { sql: string; params: Array<string | null> },
  ): Promise<T> {
    const client = await this.dedicated();
    let broken: unknown;
    let committing = false;
    try {
      const opened = opening ? await openWith(client, opening) : (await client.query('BEGIN'), []);
      const result = await work(this.preparing(client), opened);
      committing = true;
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
      throw committing ? translateUnanswered(e) : translate(e);
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

/** BEGIN and `opening` in one simple query (see Database.transaction); the rows of `opening`. */
async function openWith(client: Client, opening: { sql: string; params: Array<string | null> }): Promise<Row[]> {
  const sql = opening.sql.replace(/\$(\d+)\b/g, (_, n: string) => {
    const value = opening.params[Number(n) - 1];
    if (value === undefined) throw new Error(`no parameter $${n} for the opening statement`);
    return value === null ? 'NULL' : client.escapeLiteral(value);
  });
  const results = (await client.query(`BEGIN; ${sql}`)) as unknown as pg.QueryResult[];
  return results[1].rows;
}

/** pg's answer when a query ran past `timeoutMs` (query_timeout): the connection may have gone silent. */
export function timedOut(e: unknown): boolean {
  return e instanceof Error && e.message === 'Query read timeout';
}

function connectionLost(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  return (
    (err.code !== undefined &&
      (unavailableCodes.test(err.code) || /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT)$/.test(err.code))) ||
    /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/.test(
      err.message ?? '',
    ) ||
    timedOut(e)
  );
}

/** A statement run on its own that changes rows commits by itself: its own first word, or a data-changing CTE. */
function changesRows(sql: string): boolean {
  return /^\s*(insert|update|delete|merge)\b/i.test(sql) || /^\s*with\b[\s\S]*\b(insert|update|delete)\b/i.test(sql);
}

/**
 * A COMMIT, or a change committing by itself, whose answer never came (given up, or its connection lost once sent)
 * may have committed: PostgreSQL may have made it durable just before. Whoever sees this must not be told that
 * nothing changed.
 */
function translateUnanswered(e: unknown): unknown {
  const neverSent = /^timeout exceeded when trying to connect/.test((e as { message?: string }).message ?? '');
  if (!connectionLost(e) || neverSent) return translate(e);
  return new ApiError(
    503,
    'store_unavailable',
    'The database did not confirm the change: it may or may not have been saved. Retry the same request with ' +
      'the same Idempotency-Key in a few seconds (safe: a change already saved is not made twice), or read the ' +
      'record to see whether it was.',
    { retryable: true, retryAfterSeconds: 2 },
  );
}

function translate(e: unknown): unknown {
  if (e instanceof ApiError) return e;
  const err = e as { code?: string; message?: string };
  // A prepared plan gone stale inside a transaction (see preparing): rolled back, prepared afresh on the next try.
  const stalePlan = err.code === '0A000' && /cached plan must not change result type/.test(err.message ?? '');
  if (connectionLost(e) || stalePlan) {
    return new ApiError(
      503,
      'store_unavailable',
      'The database is unavailable for a moment. Nothing was changed: retry the same request (with the same ' +
        'Idempotency-Key) in a few seconds.',
      { retryable: true, retryAfterSeconds: 2 },
    );
  }
  return e;
}
