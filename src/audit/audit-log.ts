import type { Database } from '../store/index.js';
import type { Snapshot, SnapshotFiles } from '../pricing/index.js';
import { chainHash, GENESIS_CHAIN_HASH, sha256 } from './canonical.js';

export interface StoredRecord {
  seq: string;
  id: string;
  kind: string;
  snapshot_hash: string;
  record: string;
  record_hash: string;
  prev_chain_hash: string;
  chain_hash: string;
  created_at: Date;
}

export interface ChainProblem { seq: string; id?: string; problem: string }

/** The audit trail in PostgreSQL: content-addressed snapshots and hash-chained records. */
export class AuditLog {
  private readonly savedSnapshots = new Set<string>();

  constructor(private readonly db: Database) {}

  async saveSnapshot(snapshot: Pick<Snapshot, 'hash' | 'files'>): Promise<void> {
    if (this.savedSnapshots.has(snapshot.hash)) return;
    await this.db.query('INSERT INTO snapshots (hash, files) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING', [snapshot.hash, snapshot.files]);
    this.savedSnapshots.add(snapshot.hash);
  }

  async snapshotFiles(hash: string): Promise<SnapshotFiles | undefined> {
    const [row] = await this.db.query<{ files: SnapshotFiles }>('SELECT files FROM snapshots WHERE hash = $1', [hash]);
    return row?.files;
  }

  async list(options: { limit: number; beforeSeq?: string }): Promise<StoredRecord[]> {
    return this.db.query<StoredRecord & Record<string, unknown>>(
      'SELECT * FROM audit_records WHERE ($2::bigint IS NULL OR seq < $2) ORDER BY seq DESC LIMIT $1', [options.limit, options.beforeSeq ?? null]);
  }

  async get(id: string): Promise<StoredRecord | undefined> {
    const [row] = await this.db.query<StoredRecord & Record<string, unknown>>('SELECT * FROM audit_records WHERE id = $1', [id]);
    return row;
  }

  async *all(batch = 500): AsyncGenerator<StoredRecord> {
    let after = '0';
    for (;;) {
      const rows = await this.db.query<StoredRecord & Record<string, unknown>>('SELECT * FROM audit_records WHERE seq > $1 ORDER BY seq LIMIT $2', [after, batch]);
      yield* rows;
      if (rows.length < batch) return;
      after = rows[rows.length - 1].seq;
    }
  }

  /** Recomputes every record hash and chain link; an edited, inserted or deleted record breaks the chain. */
  async verify(): Promise<{ checked: number; problems: ChainProblem[] }> {
    const problems: ChainProblem[] = [];
    let previous = GENESIS_CHAIN_HASH;
    let expectedSeq = 1n;
    let checked = 0;
    for await (const r of this.all()) {
      checked++;
      if (BigInt(r.seq) !== expectedSeq) problems.push({ seq: r.seq, id: r.id, problem: `sequence jumps from ${expectedSeq - 1n} to ${r.seq}: records are missing` });
      if (sha256(r.record) !== r.record_hash) problems.push({ seq: r.seq, id: r.id, problem: 'record text does not match its record_hash: the record was edited' });
      if (r.prev_chain_hash !== previous) problems.push({ seq: r.seq, id: r.id, problem: 'prev_chain_hash does not match the previous record: the chain was broken' });
      if (chainHash(r.prev_chain_hash, r.record_hash) !== r.chain_hash) problems.push({ seq: r.seq, id: r.id, problem: 'chain_hash does not follow from prev_chain_hash and record_hash' });
      const stored = JSON.parse(r.record) as { id?: string; snapshot_hash?: string };
      if (stored.id !== r.id || stored.snapshot_hash !== r.snapshot_hash) problems.push({ seq: r.seq, id: r.id, problem: 'the record body names another id or snapshot than its row' });
      previous = r.chain_hash;
      expectedSeq = BigInt(r.seq) + 1n;
    }
    const [head] = await this.db.query<{ seq: string; chain_hash: string }>('SELECT seq::text, chain_hash FROM audit_head');
    if (!head || head.chain_hash !== previous || BigInt(head.seq) !== expectedSeq - 1n) {
      problems.push({ seq: head?.seq ?? '?', problem: `the chain head (seq ${head?.seq}) does not match the last record (seq ${expectedSeq - 1n}): records at the end were deleted or added` });
    }
    return { checked, problems };
  }
}
