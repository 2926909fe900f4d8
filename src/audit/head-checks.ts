import type { KeyObject } from 'node:crypto';
import { GENESIS_CHAIN_HASH } from './canonical.js';
import type { ChainProblem } from './chain-problem.js';
import { HEAD_TYPE, keyIdOf, signedHeadProblem, type SignedCheckpoint, type SignedHead } from './signing.js';

type Kept<T> = { signed: T; source: string };

/** The signed heads the chain must pass through, and what was wrong with the others. */
export interface ExpectedHeads {
  /** Heads by the seq they sign. */
  wanted: Map<string, Kept<SignedHead>[]>;
  /** Checkpoints (the public heads) carry no seq: the record whose link they name is found by that link. */
  checkpoints: Map<string, Kept<SignedCheckpoint>[]>;
  problems: ChainProblem[];
  notes: string[];
}

/** A record as the walk sees it: its place and link. */
interface Linked {
  seq: string;
  id: string;
  chain_hash: string;
  prev_chain_hash: string;
}

/**
 * The heads kept in the database (those signed by the operator key when it is known) and the ones an auditor kept
 * (`given`), each checked under the operator key.
 */
export function expectedHeads(
  all: SignedHead[],
  given: Array<SignedHead | SignedCheckpoint>,
  operatorKey?: KeyObject,
): ExpectedHeads {
  const expected: ExpectedHeads = { wanted: new Map(), checkpoints: new Map(), problems: [], notes: [] };
  // Kept heads signed with another key (each development instance has its own) prove nothing here; say so.
  const stored = operatorKey ? all.filter((h) => h.head?.key_id === keyIdOf(operatorKey)) : all;
  const others = [...new Set(all.filter((h) => !stored.includes(h)).map((h) => String(h.head?.key_id)))];
  if (others.length)
    expected.notes.push(
      `${all.length - stored.length} signed heads kept by other keys (${others.join(', ')}) were not checked`,
    );
  const heads = [
    ...stored.map((h) => ({ signed: h, source: 'kept in audit_signed_heads' })),
    ...given.map((h) => ({ signed: h, source: 'given' })),
  ];
  for (const h of heads) {
    const problem = operatorKey || h.source === 'given' ? signedHeadProblem(h.signed, operatorKey) : undefined;
    const seq = (h.signed?.head as { seq?: unknown } | undefined)?.seq;
    if (problem) expected.problems.push({ seq: String(seq ?? '?'), problem: `signed head (${h.source}): ${problem}` });
    else if (h.signed.head.type === HEAD_TYPE) append(expected.wanted, h.signed.head.seq, h as Kept<SignedHead>);
    else append(expected.checkpoints, h.signed.head.chain_hash, h as Kept<SignedCheckpoint>);
  }
  expected.checkpoints.delete(GENESIS_CHAIN_HASH);
  if (stored.length && !operatorKey)
    expected.notes.push(
      `${stored.length} signed heads were compared with the chain without checking their signatures: no ` +
        `operator key here (give --public-key)`,
    );
  return expected;
}

function append<T>(map: Map<string, T[]>, key: string, value: T): void {
  map.set(key, [...(map.get(key) ?? []), value]);
}

/** The heads that sign this record's link: each must name it; both kinds are then reached. */
export function headsAtRecord(expected: ExpectedHeads, r: Linked, linked: string): string[] {
  const problems: string[] = [];
  for (const h of expected.wanted.get(r.seq) ?? []) {
    if (h.signed.head.chain_hash !== r.chain_hash || linked !== h.signed.head.chain_hash) {
      problems.push(
        `the chain at seq ${r.seq} does not end in the signed head's ${h.signed.head.chain_hash} (head ` +
          `${h.source}, signed ${h.signed.head.signed_at}): the log up to here was rewritten`,
      );
    }
  }
  expected.wanted.delete(r.seq);
  if (linked === r.chain_hash) expected.checkpoints.delete(r.chain_hash);
  return problems;
}

/** The heads no record reached once the whole chain was walked: records deleted or the log rewritten. */
export function headsNotReached(expected: ExpectedHeads): ChainProblem[] {
  const problems: ChainProblem[] = [];
  for (const h of expected.wanted.get('0') ?? []) {
    if (h.signed.head.chain_hash !== GENESIS_CHAIN_HASH)
      problems.push({
        seq: '0',
        problem: `a signed head (${h.source}) of the empty log names ${h.signed.head.chain_hash}, not the genesis hash`,
      });
  }
  expected.wanted.delete('0');
  for (const [seq, hs] of expected.wanted)
    for (const h of hs)
      problems.push({
        seq,
        problem: `a signed head (${h.source}) covers seq ${seq}, which is not in the log: records were deleted`,
      });
  for (const [hash, hs] of expected.checkpoints) {
    for (const h of hs) {
      problems.push({
        seq: '?',
        problem:
          `the chain does not end in the signed head's ${hash} at any record (head ${h.source}, signed ` +
          `${h.signed.head.signed_at}): the log up to it was rewritten or records were deleted`,
      });
    }
  }
  return problems;
}
