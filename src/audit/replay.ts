import {
  evaluateExtension,
  evaluatePrice,
  evaluateRefund,
  evaluateUpgrade,
  openSnapshot,
  snapshotHash,
  type Snapshot,
  type SnapshotFiles,
} from '../pricing/index.js';
import type { AuditLog } from './audit-log.js';
import { canonicalJson, sha256 } from './canonical.js';
import { extensionRecord, extensionResult, type ExtensionRecord } from './extension-record.js';
import { jsonDiff, type Difference } from './json-diff.js';
import { priceRecord, upgradeRecord, type PriceRecord, type UpgradeRecord } from './record.js';
import { refundRecord, refundResult, type RefundRecord } from './refund-record.js';
import { evaluatorVersions } from './versions.js';

type EvaluationRecord = PriceRecord | UpgradeRecord | ExtensionRecord | RefundRecord;

/** The record kinds that are price evaluations, replayable on their snapshot. */
export const EVALUATION_KINDS = [
  'quote_price',
  'order_price',
  'upgrade_price',
  'extension_price',
  'refund_evaluation',
] as const;

export interface ReplayReport {
  id: string;
  kind?: string;
  identical: boolean;
  stored_output_hash: string;
  replayed_output_hash?: string;
  trace_identical?: boolean;
  /** Each field where the replay differs from the record: a JSON path, the recorded and the replayed value. */
  differences?: Difference[];
  versions_differ?: Record<string, { recorded: string; now: string }>;
  problem?: string;
}

/**
 * Replays one record text on the snapshot it names: the same evaluation is run again from the record's own inputs
 * and every derived field (outputs, traces, facts, credit, amounts) must come out byte for byte the same.
 */
export async function replayRecordText(
  id: string,
  text: string,
  snapshotOf: (hash: string) => Promise<Snapshot | undefined>,
): Promise<ReplayReport> {
  const record = JSON.parse(text) as EvaluationRecord;
  const storedHash = resultHash(record);
  const report: ReplayReport = { id, kind: record.kind, identical: false, stored_output_hash: storedHash };
  const differ = Object.entries(evaluatorVersions).filter(([k, v]) => record.versions?.[k] !== v);
  if (differ.length)
    report.versions_differ = Object.fromEntries(
      differ.map(([k, v]) => [k, { recorded: record.versions?.[k], now: v }]),
    );

  const snapshot = await snapshotOf(record.snapshot_hash);
  if (!snapshot)
    return {
      ...report,
      problem:
        `snapshot ${record.snapshot_hash} is missing, was edited (its files no longer hash to it), or no ` +
        `longer opens`,
    };
  let replayed: EvaluationRecord;
  if (record.kind === 'refund_evaluation') {
    replayed = refundRecord(
      record.id,
      record.snapshot_hash,
      record.input,
      await evaluateRefund(snapshot, record.input),
      new Date(record.evaluated_at),
    ).record;
  } else if (record.kind === 'extension_price') {
    const evaluation = await evaluateExtension(snapshot, record.input);
    if (evaluation.outcome !== 'priced') return { ...report, problem: `the replay was refused: ${evaluation.message}` };
    replayed = extensionRecord(
      record.id,
      record.snapshot_hash,
      record.input,
      evaluation,
      new Date(record.evaluated_at),
    ).record;
  } else if (record.kind === 'upgrade_price') {
    const evaluation = await evaluateUpgrade(snapshot, record.input);
    if (evaluation.outcome !== 'priced') return { ...report, problem: `the replay was refused: ${evaluation.message}` };
    replayed = upgradeRecord(
      record.id,
      record.snapshot_hash,
      record.input,
      evaluation,
      new Date(record.evaluated_at),
    ).record;
  } else {
    const evaluation = await evaluatePrice(snapshot, record.input);
    if (evaluation.outcome !== 'priced') return { ...report, problem: `the replay was ${evaluation.outcome}` };
    replayed = priceRecord(
      record.id,
      record.snapshot_hash,
      record.input,
      evaluation,
      new Date(record.evaluated_at),
      record.kind,
    ).record;
  }
  // The versions are reported apart: a replay on newer libraries that gives the same bytes is still identical.
  const differences = jsonDiff(
    { ...record, versions: undefined },
    JSON.parse(canonicalJson({ ...replayed, versions: undefined })),
  );
  report.replayed_output_hash = resultHash(replayed);
  report.trace_identical = !differences.some((d) => /\.trace\b|^\$\.(target|current|total|paid)\.trace/.test(d.path));
  report.identical = differences.length === 0;
  if (differences.length) report.differences = differences;
  return report;
}

/** The hash of what a record derives from its inputs. */
function resultHash(record: EvaluationRecord): string {
  if (record.kind === 'extension_price') return sha256(canonicalJson(extensionResult(record)));
  if (record.kind === 'refund_evaluation') return sha256(canonicalJson(refundResult(record)));
  return record.kind === 'upgrade_price' ? sha256(canonicalJson(upgradeResult(record))) : record.output_hash;
}

/** What an upgrade record derives from its inputs. */
function upgradeResult(record: UpgradeRecord): unknown {
  return {
    target: record.target,
    current: record.current,
    credit_atomic: record.credit_atomic,
    minimum_atomic: record.minimum_atomic,
    amount_atomic: record.amount_atomic,
  };
}

/** Opens snapshot files once per hash. */
export function snapshotCache(
  filesOf: (hash: string) => Promise<SnapshotFiles | undefined>,
): (hash: string) => Promise<Snapshot | undefined> {
  const snapshots = new Map<string, Promise<Snapshot | undefined>>();
  return (hash) => {
    let pending = snapshots.get(hash);
    if (!pending) {
      // Files that no longer hash to their name were edited: nothing is replayed on them.
      pending = filesOf(hash).then(async (files) =>
        files && snapshotHash(files) === hash ? (await openSnapshot(files)).snapshot : undefined,
      );
      snapshots.set(hash, pending);
    }
    return pending;
  };
}

/** Re-evaluates stored records on the exact catalog and rules they ran on and compares the bytes. */
export class Replayer {
  private readonly snapshot: (hash: string) => Promise<Snapshot | undefined>;

  constructor(private readonly log: AuditLog) {
    this.snapshot = snapshotCache((hash) => this.log.snapshotFiles(hash));
  }

  async replay(id: string): Promise<ReplayReport> {
    const stored = await this.log.get(id);
    if (!stored) return { id, identical: false, stored_output_hash: '', problem: 'no such record' };
    if (!(EVALUATION_KINDS as readonly string[]).includes(stored.kind)) {
      return {
        id,
        kind: stored.kind,
        identical: false,
        stored_output_hash: '',
        problem: `a ${stored.kind} record is not a price evaluation; audit verify checks it`,
      };
    }
    return replayRecordText(id, stored.record, this.snapshot);
  }
}
