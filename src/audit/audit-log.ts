import type { KeyObject } from 'node:crypto';
import type { Database } from '../store/index.js';
import type { Snapshot, SnapshotFiles } from '../pricing/index.js';
import { canonicalJson, linkHash } from './canonical.js';
import type { ChainProblem } from './chain-problem.js';
import { expectedHeads, headsAtRecord, headsNotReached } from './head-checks.js';
import { bodyProblems, chainStart, linkProblems, type ChainWalk } from './record-checks.js';
import { checkOrderHistory, OrderStates } from './order-states.js';
import type { SignedCheckpoint, SignedHead } from './signing.js';
import type { StoredRecord } from './stored-record.js';

export type { StoredRecord } from './stored-record.js';

export interface ListFilter {
  limit: number;
  beforeSeq?: string;
  kind?: string;
  productId?: string;
  apiKeyId?: string;
  since?: Date;
  until?: Date;
}

/** What names a refund's records: its id (in its proofs), its evaluation, and the subject they are chained under. */
export interface RefundKey {
  id: string;
  evaluation_id: string | null;
  service_id: string | null;
  order_id: string | null;
}

const columns = 'r.*, audit_time(r.created_at) AS created_at_text';

/** The audit trail in PostgreSQL: content-addressed snapshots and hash-chained records. */
export class AuditLog {
  private readonly savedSnapshots = new Set<string>();

  constructor(private readonly db: Database) {}

  async saveSnapshot(snapshot: Pick<Snapshot, 'hash' | 'files'>): Promise<void> {
    if (this.savedSnapshots.has(snapshot.hash)) return;
    await this.db.query('INSERT INTO snapshots (hash, files) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING', [
      snapshot.hash,
      snapshot.files,
    ]);
    this.savedSnapshots.add(snapshot.hash);
  }

  async snapshotFiles(hash: string): Promise<SnapshotFiles | undefined> {
    const [row] = await this.db.query<{ files: SnapshotFiles }>('SELECT files FROM snapshots WHERE hash = $1', [hash]);
    return row?.files;
  }

  /**
   * Latest records first. The product is the evaluated product (or the order's); the API key is the one that asked
   * for the quote or paid the order.
   */
  async list(filter: ListFilter): Promise<StoredRecord[]> {
    return this.db.query<StoredRecord & Record<string, unknown>>(
      `SELECT ${columns} FROM audit_records r
       WHERE ($2::bigint IS NULL OR r.seq < $2) AND ($3::text IS NULL OR r.kind = $3)
         AND ($4::text IS NULL OR coalesce(r.record::jsonb #>> '{input,product_id}', r.record::jsonb #>> '{input,to_product_id}', r.record::jsonb ->> 'product_id') = $4)
         AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM quotes q WHERE q.evaluation_id = r.id AND q.api_key_id = $5)
                               OR EXISTS (SELECT 1 FROM orders o WHERE (o.evaluation_id = r.id OR o.id = r.subject) AND o.api_key_id = $5))
         AND ($6::timestamptz IS NULL OR r.created_at >= $6) AND ($7::timestamptz IS NULL OR r.created_at < $7)
       ORDER BY r.seq DESC LIMIT $1`,
      [
        filter.limit,
        filter.beforeSeq ?? null,
        filter.kind ?? null,
        filter.productId ?? null,
        filter.apiKeyId ?? null,
        filter.since ?? null,
        filter.until ?? null,
      ],
    );
  }

  async get(id: string): Promise<StoredRecord | undefined> {
    const [row] = await this.db.query<StoredRecord & Record<string, unknown>>(
      `SELECT ${columns} FROM audit_records r WHERE r.id = $1`,
      [id],
    );
    return row;
  }

  /** The chained states of an order, oldest first. */
  async orderStates(orderId: string): Promise<StoredRecord[]> {
    return this.db.query<StoredRecord & Record<string, unknown>>(
      `SELECT ${columns} FROM audit_records r WHERE r.subject = $1 ORDER BY r.seq`,
      [orderId],
    );
  }

  /**
   * What an id names: an evaluation record, or the evaluation behind a quote, an order or a service (its order and
   * every upgrade and extension), with the orders' chained states.
   */
  async lookup(id: string): Promise<{ about: string; records: StoredRecord[] } | undefined> {
    const direct = await this.get(id);
    if (direct) return { about: `record ${id}`, records: [direct] };
    const [quote] = await this.db.query<{ evaluation_id: string }>('SELECT evaluation_id FROM quotes WHERE id = $1', [
      id,
    ]);
    if (quote) return { about: `quote ${id}`, records: [(await this.get(quote.evaluation_id))!] };
    const orders = await this.db.query<{ id: string; evaluation_id: string | null }>(
      `SELECT id, evaluation_id FROM orders WHERE id = $1
       UNION ALL SELECT o.id, o.evaluation_id FROM services s JOIN orders o ON o.id = s.order_id OR o.upgrade_of = s.id OR o.extension_of = s.id WHERE s.id = $1`,
      [id],
    );
    if (!orders.length) return undefined;
    const records: StoredRecord[] = [];
    for (const order of orders) {
      const evaluation = order.evaluation_id ? await this.get(order.evaluation_id) : undefined;
      if (evaluation) records.push(evaluation);
      records.push(...(await this.orderStates(order.id)));
    }
    records.push(...(await this.refundRecords([id, ...orders.map((o) => o.id)])));
    records.sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
    return { about: orders.length > 1 || orders[0].id !== id ? `service ${id}` : `order ${id}`, records };
  }

  /** Refund evaluations and proofs about these services or orders (their subject). */
  private async refundRecords(subjects: string[]): Promise<StoredRecord[]> {
    return this.db.query<StoredRecord & Record<string, unknown>>(
      `SELECT ${columns} FROM audit_records r WHERE r.subject = ANY($1) AND r.kind IN ('refund_evaluation', ` +
        `'refund_sent') ORDER BY r.seq`,
      [[...new Set(subjects)]],
    );
  }

  /** The chained evaluations of these refunds and the proofs of their transfers, in chain order. */
  async refundEvidence(refunds: RefundKey[]): Promise<StoredRecord[]> {
    const subjects = refunds.flatMap((r) => r.service_id ?? r.order_id ?? []);
    const ids = new Set(refunds.flatMap((r) => [r.id, r.evaluation_id ?? []].flat()));
    const rows = await this.refundRecords(subjects);
    return rows.filter((r) => ids.has(r.id) || (r.kind === 'refund_sent' && ids.has(JSON.parse(r.record).refund_id)));
  }

  async *all(batch = 500): AsyncGenerator<StoredRecord> {
    let after = '0';
    for (;;) {
      const rows = await this.db.query<StoredRecord & Record<string, unknown>>(
        `SELECT ${columns} FROM audit_records r WHERE r.seq > $1 ORDER BY r.seq LIMIT $2`,
        [after, batch],
      );
      yield* rows;
      if (rows.length < batch) return;
      after = rows[rows.length - 1].seq;
    }
  }

  async signedHeads(): Promise<SignedHead[]> {
    const rows = await this.db.query<{ document: string; signature: string }>(
      'SELECT document, signature FROM audit_signed_heads ORDER BY seq',
    );
    return rows.map((r) => ({ head: JSON.parse(r.document), signature: r.signature, public_key: '' }));
  }

  /**
   * Recomputes every record hash and chain link over every stored field; checks each order's chained history
   * (terms never change after the claim, states only move forward), that each order row equals its last chained
   * state, and that the chain passes through every signed head: the ones kept in the database and the ones an
   * auditor kept (`heads`), under the operator key.
   */
  async verify(
    options: { operatorKey?: KeyObject; heads?: Array<SignedHead | SignedCheckpoint>; provisionBoundMs?: number } = {},
  ): Promise<{ checked: number; problems: ChainProblem[]; notes: string[] }> {
    const expected = expectedHeads(await this.signedHeads(), options.heads ?? [], options.operatorKey);
    const problems: ChainProblem[] = [...expected.problems];
    const orders = new OrderStates();
    const walk = chainStart();
    let checked = 0;
    for await (const r of this.all()) {
      checked++;
      const found = [
        ...linkProblems(r, walk),
        ...bodyProblems(r, orders),
        ...headsAtRecord(expected, r, linkHash(r.prev_chain_hash, r)),
      ];
      problems.push(...found.map((problem) => ({ seq: r.seq, id: r.id, problem })));
      walk.previous = r.chain_hash;
      walk.expectedSeq = BigInt(r.seq) + 1n;
    }
    problems.push(...headsNotReached(expected));
    problems.push(...(await this.headProblems(walk)));
    problems.push(...checkOrderHistory(orders));
    problems.push(...(await this.ordersAgainstChain(orders)));
    problems.push(...(await this.quotedOrders()));
    if (options.provisionBoundMs !== undefined)
      problems.push(...(await this.undeliveredOrders(options.provisionBoundMs)));
    return { checked, problems, notes: expected.notes };
  }

  /** The chain head row must name the last record walked. */
  private async headProblems(walk: ChainWalk): Promise<ChainProblem[]> {
    const [head] = await this.db.query<{ seq: string; chain_hash: string }>(
      'SELECT seq::text, chain_hash FROM audit_head',
    );
    if (head && head.chain_hash === walk.previous && BigInt(head.seq) === walk.expectedSeq - 1n) return [];
    return [
      {
        seq: head?.seq ?? '?',
        problem:
          `the chain head (seq ${head?.seq}) does not match the last record (seq ${walk.expectedSeq - 1n}): ` +
          `records at the end were deleted or added`,
      },
    ];
  }

  /** A settled order must be provisioned or refunded within the bound: one that is neither was paid for nothing. */
  private async undeliveredOrders(boundMs: number): Promise<ChainProblem[]> {
    const rows = await this.db.query<{ id: string; settled_at: Date }>(
      `SELECT id, settled_at FROM orders WHERE state = 'provisioning' AND settled_at < now() - ` +
        `make_interval(secs => $1::double precision / 1000) ORDER BY settled_at`,
      [boundMs],
    );
    return rows.map((r) => ({
      seq: '-',
      id: r.id,
      undelivered: true,
      problem:
        `order ${r.id}: settled at ${r.settled_at.toISOString()} and neither provisioned nor refunded ` +
        `after ${Math.round(boundMs / 1000)} s`,
    }));
  }

  /** An order paid at a quote's locked price charged exactly what that quote's (chained) evaluation says. */
  private async quotedOrders(): Promise<ChainProblem[]> {
    const rows = await this.db.query<{ id: string; amount: string; quoted: string | null; evaluation_id: string }>(
      `SELECT o.id, o.amount_atomic::text AS amount, r.record::jsonb #>> '{output,total_atomic}' AS quoted, q.evaluation_id
       FROM orders o JOIN quotes q ON q.id = o.quote_id JOIN audit_records r ON r.id = q.evaluation_id
       WHERE (r.record::jsonb #>> '{output,total_atomic}') IS DISTINCT FROM o.amount_atomic::text`,
    );
    return rows.map((r) => ({
      seq: '-',
      id: r.id,
      problem:
        `order ${r.id}: charged ${r.amount} atomic units at quote price, but the quote's evaluation ` +
        `${r.evaluation_id} says ${r.quoted}`,
    }));
  }

  /** Each order row must equal its last chained state; a row without one was written outside the chain. */
  private async ordersAgainstChain(orders: OrderStates): Promise<ChainProblem[]> {
    const problems: ChainProblem[] = [];
    const seen = new Set<string>();
    let after = '';
    for (;;) {
      const rows = await this.db.query<{ id: string; state: Record<string, unknown> }>(
        'SELECT o.id, order_audit_state(o) AS state FROM orders o WHERE o.id > $1 ORDER BY o.id LIMIT 500',
        [after],
      );
      for (const row of rows) {
        seen.add(row.id);
        const last = orders.last(row.id);
        if (!last) {
          problems.push({
            seq: '-',
            id: row.id,
            problem: `order ${row.id} has no chained state: it was written outside the audit chain`,
          });
          continue;
        }
        for (const field of [...new Set([...Object.keys(row.state), ...Object.keys(last.state)])].sort()) {
          const now = canonicalJson(row.state[field] ?? null);
          const chained = canonicalJson(last.state[field] ?? null);
          if (now !== chained)
            problems.push({
              seq: last.seq,
              id: row.id,
              problem:
                `order ${row.id}: ${field} is ${now} in the orders table but ${chained} in its last chained ` +
                `state: the row was edited outside the chain`,
            });
        }
      }
      if (rows.length < 500) break;
      after = rows[rows.length - 1].id;
    }
    for (const id of orders.ids())
      if (!seen.has(id))
        problems.push({
          seq: orders.last(id)!.seq,
          id,
          problem: `order ${id} is in the chain but not in the orders table: it was deleted`,
        });
    return problems;
  }
}
