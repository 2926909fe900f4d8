import { evaluatePrice, openSnapshot, type Snapshot } from '../pricing/index.js';
import type { AuditLog } from './audit-log.js';
import { canonicalJson, sha256 } from './canonical.js';
import type { PriceRecord } from './record.js';
import { evaluatorVersions } from './versions.js';

export interface ReplayReport {
  id: string;
  identical: boolean;
  stored_output_hash: string;
  replayed_output_hash?: string;
  trace_identical?: boolean;
  versions_differ?: Record<string, { recorded: string; now: string }>;
  problem?: string;
}

/** Re-evaluates stored records on the exact catalog and rules they ran on and compares the output bytes. */
export class Replayer {
  private readonly snapshots = new Map<string, Promise<Snapshot | undefined>>();

  constructor(private readonly log: AuditLog) {}

  async replay(id: string): Promise<ReplayReport> {
    const stored = await this.log.get(id);
    if (!stored) return { id, identical: false, stored_output_hash: '', problem: 'no such record' };
    const record = JSON.parse(stored.record) as PriceRecord;
    const report: ReplayReport = { id, identical: false, stored_output_hash: record.output_hash };
    const differ = Object.entries(evaluatorVersions).filter(([k, v]) => record.versions[k] !== v);
    if (differ.length) report.versions_differ = Object.fromEntries(differ.map(([k, v]) => [k, { recorded: record.versions[k], now: v }]));

    const snapshot = await this.snapshot(record.snapshot_hash);
    if (!snapshot) return { ...report, problem: `snapshot ${record.snapshot_hash} is missing or no longer opens` };
    const evaluation = await evaluatePrice(snapshot, record.input);
    if (evaluation.outcome !== 'priced') return { ...report, problem: `the replay was ${evaluation.outcome}` };
    const replayedText = canonicalJson(evaluation.output);
    report.replayed_output_hash = sha256(replayedText);
    report.trace_identical = canonicalJson(evaluation.trace.quote) === canonicalJson(record.trace);
    report.identical = replayedText === canonicalJson(record.output) && report.replayed_output_hash === record.output_hash && report.trace_identical;
    return report;
  }

  private snapshot(hash: string): Promise<Snapshot | undefined> {
    let pending = this.snapshots.get(hash);
    if (!pending) {
      pending = this.log.snapshotFiles(hash).then(async (files) => (files ? (await openSnapshot(files)).snapshot : undefined));
      this.snapshots.set(hash, pending);
    }
    return pending;
  }
}
