import type { KeyObject } from 'node:crypto';
import { snapshotHash } from '../pricing/index.js';
import { canonicalJson, chainHash, entryHash, sha256 } from './canonical.js';
import { BUNDLE_TYPE, type AuditBundle, type BundleLink } from './bundle.js';
import { checkRefunds } from './bundle-refund-check.js';
import { checkOrderHistory, OrderStates } from './order-states.js';
import { EVALUATION_KINDS, replayRecordText, snapshotCache, type ReplayReport } from './replay.js';
import { signedHeadProblem } from './signing.js';

export interface BundleVerdict {
  ok: boolean;
  problems: string[];
  replays: ReplayReport[];
  /** What was established, for the auditor to read. */
  facts: string[];
}

/** What one part of the check found. */
interface Findings {
  problems: string[];
  facts: string[];
}

/**
 * Checks a bundle on its own: every record's hash and chain link up to the signed head, the head's signature
 * (under `trusted` when the auditor has the operator's published key), the snapshots' content hashes, a replay
 * of every evaluation on its own snapshot, field by field, and each refund against its records and its receipt.
 */
export async function verifyBundle(bundle: AuditBundle, trusted?: KeyObject): Promise<BundleVerdict> {
  if (bundle?.type !== BUNDLE_TYPE)
    return {
      ok: false,
      problems: [`not an audit bundle (type ${JSON.stringify(bundle?.type)})`],
      replays: [],
      facts: [],
    };
  const chain = checkChain(bundle, trusted);
  const records = checkRecords(bundle, chain.links);
  const snapshots = checkSnapshots(bundle);
  const replayed = await replayEvaluations(bundle);
  const refunds = checkRefunds(bundle, trusted);
  const parts = [chain, records, snapshots, refunds, replayed];
  const problems = parts.flatMap((p) => p.problems);
  return { ok: problems.length === 0, problems, replays: replayed.replays, facts: parts.flatMap((p) => p.facts) };
}

/** Each link follows from the previous one; the last one is the signed head, whose signature holds. */
function checkChain(bundle: AuditBundle, trusted?: KeyObject): Findings & { links: Map<string, BundleLink> } {
  const problems: string[] = [];
  const facts: string[] = [];
  const links = new Map<string, BundleLink>();
  let previous = bundle.chain.prev_chain_hash;
  let expected: bigint | undefined;
  for (const link of bundle.chain.links) {
    if (expected !== undefined && BigInt(link.seq) !== expected)
      problems.push(`chain: seq ${link.seq} follows ${expected - 1n}: links are missing`);
    if (chainHash(previous, link.hash) !== link.chain_hash)
      problems.push(`chain: the link at seq ${link.seq} does not follow from the one before it`);
    links.set(link.seq, link);
    previous = link.chain_hash;
    expected = BigInt(link.seq) + 1n;
  }
  const last = bundle.chain.links.at(-1);
  const head = bundle.signed_head?.head;
  if (!last || !head || head.seq !== last.seq || head.chain_hash !== last.chain_hash) {
    problems.push(
      `chain: it does not end in the signed head (head seq ${head?.seq} ${head?.chain_hash}, last link seq ` +
        `${last?.seq} ${last?.chain_hash})`,
    );
  }
  const signature = signedHeadProblem(bundle.signed_head, trusted);
  if (signature) problems.push(`signed head: ${signature}`);
  else
    facts.push(
      `the chain up to seq ${head.seq} ends in ${head.chain_hash}, signed ${head.signed_at} by key ` +
        `${head.key_id}${trusted ? ' (the operator key given)' : ' (the key in the bundle: compare it with the key the operator publishes at GET /api/v1/audit/head)'}`,
    );
  return { problems, facts, links };
}

/** The records: their text, their stored fields and their place in the chain; then the orders' histories. */
function checkRecords(bundle: AuditBundle, chainAt: Map<string, BundleLink>): Findings {
  const problems: string[] = [];
  const orders = new OrderStates();
  for (const r of bundle.records) {
    const where = `record ${r.id} (seq ${r.seq}, ${r.kind})`;
    if (sha256(r.record) !== r.record_hash)
      problems.push(`${where}: its text does not match its record_hash: the record was edited`);
    const link = chainAt.get(r.seq);
    const hash = r.format === 1 ? r.record_hash : entryHash({ ...r, created_at_text: r.created_at });
    if (!link) problems.push(`${where}: not on the chain path`);
    else if (link.hash !== hash || link.format !== r.format)
      problems.push(
        `${where}: its stored fields (kind, created_at, id, snapshot, subject, record hash) do not give the ` +
          `chained link: a field was edited`,
      );
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(r.record);
    } catch {
      problems.push(`${where}: the text is not JSON`);
      continue;
    }
    if (r.kind === 'order_state') orders.add(r.seq, body);
    else orders.evaluation(r.id, body);
  }
  for (const p of checkOrderHistory(orders)) problems.push(`seq ${p.seq}: ${p.problem}`);
  const settled = checkSettlements(bundle, orders);
  return { problems: [...problems, ...settled.problems], facts: settled.facts };
}

/** Each order's final chained state, and the bundle's settlement agrees with it. */
function checkSettlements(bundle: AuditBundle, orders: OrderStates): Findings {
  const problems: string[] = [];
  const facts: string[] = [];
  for (const [id, states] of orders.entries()) {
    const final = states.at(-1)!.state;
    const settlement = final.settlement as { transaction?: string } | null;
    facts.push(
      `order ${id}: ${final.state}, ${final.amount_atomic} atomic units from ` +
        `${final.payer}${settlement?.transaction ? `, transaction ${settlement.transaction}` : ''}`,
    );
    if (
      bundle.settlements?.[id] !== undefined &&
      canonicalJson(bundle.settlements[id]) !== canonicalJson(final.settlement ?? null)
    ) {
      problems.push(`order ${id}: the settlement in the bundle differs from its last chained state`);
    }
  }
  return { problems, facts };
}

function checkSnapshots(bundle: AuditBundle): Findings {
  const problems: string[] = [];
  for (const [hash, files] of Object.entries(bundle.snapshots ?? {})) {
    if (snapshotHash(files) !== hash)
      problems.push(
        `snapshot ${hash}: its files hash to ${snapshotHash(files)}: the catalog or rules in the bundle were edited`,
      );
  }
  return { problems, facts: [] };
}

/** Every evaluation replayed on its own snapshot, field by field. */
async function replayEvaluations(bundle: AuditBundle): Promise<Findings & { replays: ReplayReport[] }> {
  const problems: string[] = [];
  const snapshotOf = snapshotCache(async (hash) => bundle.snapshots?.[hash]);
  const replays: ReplayReport[] = [];
  for (const r of bundle.records) {
    if (!(EVALUATION_KINDS as readonly string[]).includes(r.kind)) continue;
    const report = await replayRecordText(r.id, r.record, snapshotOf).catch(
      (e) => ({ id: r.id, identical: false, stored_output_hash: '', problem: (e as Error).message }) as ReplayReport,
    );
    replays.push(report);
    if (report.problem) problems.push(`record ${r.id}: replay failed: ${report.problem}`);
    for (const d of report.differences ?? [])
      problems.push(
        `record ${r.id}: ${d.path} recorded ${JSON.stringify(d.recorded)}, replayed ${JSON.stringify(d.replayed)}`,
      );
  }
  const facts = [
    `${replays.filter((r) => r.identical).length} of ${replays.length} evaluations replayed byte for byte`,
  ];
  return { problems, facts, replays };
}
