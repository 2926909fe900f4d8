import { GENESIS_CHAIN_HASH, linkHash, sha256 } from './canonical.js';
import type { OrderStates } from './order-states.js';
import type { StoredRecord } from './stored-record.js';

/** Where the walk over the chain is: the link and seq the next record must follow, and whether format 2 began. */
export interface ChainWalk {
  previous: string;
  expectedSeq: bigint;
  seenFormat2: boolean;
}

export const chainStart = (): ChainWalk => ({ previous: GENESIS_CHAIN_HASH, expectedSeq: 1n, seenFormat2: false });

/** What is wrong with a record's place in the chain: its seq, its hash, its link over every stored field. */
export function linkProblems(r: StoredRecord, walk: ChainWalk): string[] {
  const problems: string[] = [];
  if (BigInt(r.seq) !== walk.expectedSeq)
    problems.push(`sequence jumps from ${walk.expectedSeq - 1n} to ${r.seq}: records are missing`);
  if (sha256(r.record) !== r.record_hash)
    problems.push('record text does not match its record_hash: the record was edited');
  if (r.prev_chain_hash !== walk.previous)
    problems.push('prev_chain_hash does not match the previous record: the chain was broken');
  if (r.format === 2) walk.seenFormat2 = true;
  else if (r.format !== 1 || walk.seenFormat2)
    problems.push(`format ${r.format} where format 2 links are required: a stored field was edited`);
  if (linkHash(r.prev_chain_hash, r) !== r.chain_hash) {
    problems.push(
      "chain_hash does not follow from the previous link and this record's stored fields (kind, created_at, " +
        'id, snapshot, subject, record hash): a stored field was edited',
    );
  }
  return problems;
}

/** What is wrong with a record's text against its row; an order state or evaluation is added to `orders`. */
export function bodyProblems(r: StoredRecord, orders: OrderStates): string[] {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(r.record) as Record<string, unknown>;
  } catch {
    return ['the record text is not JSON'];
  }
  if (r.kind === 'order_state') {
    if (body.order_id !== r.subject) return ['the chained order state names another order than its row'];
    orders.add(r.seq, body);
  } else if (body.id !== r.id || body.snapshot_hash !== r.snapshot_hash || body.kind !== r.kind) {
    return ['the record body names another id, kind or snapshot than its row'];
  } else {
    orders.evaluation(r.id, body);
  }
  return [];
}
