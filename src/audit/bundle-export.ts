import type { Database } from '../store/index.js';
import { entryHash } from './canonical.js';
import type { AuditLog, StoredRecord } from './audit-log.js';
import { BUNDLE_TYPE, type AuditBundle, type BundleRecord } from './bundle.js';
import { refundsOfOrders, type RefundReceiptOf } from './bundle-refunds.js';
import { signCurrentHead } from './head-publisher.js';
import { EVALUATION_KINDS } from './replay.js';
import type { HeadSigner, SignedHead } from './signing.js';

export interface BundleSelection {
  order?: string;
  quote?: string;
  since?: Date;
  until?: Date;
}

/**
 * One self-contained file: the selected records, the snapshots they ran on, the chain from the first of them to a
 * signed head (the earliest kept one that covers them all, else the current head signed now), the settlements, and
 * the refunds of the selected orders with their evaluations, proofs and receipts.
 */
export async function exportBundle(
  db: Database,
  log: AuditLog,
  selection: BundleSelection,
  signer?: HeadSigner,
  receiptOf?: RefundReceiptOf,
): Promise<AuditBundle> {
  const selected = await selectRecords(db, log, selection);
  if (!selected.length) throw new Error('nothing matches this selection');
  const orderIds = [...new Set(selected.filter((r) => r.kind === 'order_state').map((r) => r.subject!))];
  const refunds = await refundsOfOrders(db, orderIds, receiptOf);
  const records = withoutRepeats([...selected, ...(await log.refundEvidence(refunds))]);
  const head = await signedHeadCovering(db, records.at(-1)!.seq, signer);
  return {
    type: BUNDLE_TYPE,
    exported_at: new Date().toISOString(),
    selection: Object.fromEntries(
      Object.entries(selection)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, v instanceof Date ? v.toISOString() : String(v)]),
    ),
    records: records.map(bundleRecord),
    snapshots: await snapshotsOf(log, records),
    chain: await chainPath(db, records[0].seq, head.head.seq),
    signed_head: head,
    settlements: await settlementsOf(db, records),
    ...(refunds.length && { refunds: Object.fromEntries(refunds.map((r) => [r.id, r])) }),
  };
}

/** The records once each, in chain order. */
function withoutRepeats(records: StoredRecord[]): StoredRecord[] {
  const byId = new Map(records.map((r) => [r.id, r]));
  return [...byId.values()].sort((a, b) => Number(BigInt(a.seq) - BigInt(b.seq)));
}

async function chainPath(db: Database, from: string, to: string): Promise<AuditBundle['chain']> {
  const links = await db.query<StoredRecord & Record<string, unknown>>(
    `SELECT r.seq, r.id, r.kind, r.snapshot_hash, r.subject, r.record_hash, r.prev_chain_hash, r.chain_hash, r.format, audit_time(r.created_at) AS created_at_text
     FROM audit_records r WHERE r.seq BETWEEN $1 AND $2 ORDER BY r.seq`,
    [from, to],
  );
  return {
    prev_chain_hash: links[0].prev_chain_hash,
    links: links.map((l) => ({
      seq: l.seq,
      format: l.format,
      hash: l.format === 1 ? l.record_hash : entryHash(l),
      chain_hash: l.chain_hash,
    })),
  };
}

async function snapshotsOf(log: AuditLog, records: StoredRecord[]): Promise<AuditBundle['snapshots']> {
  const snapshots: AuditBundle['snapshots'] = {};
  for (const r of records) {
    if (r.snapshot_hash && !snapshots[r.snapshot_hash])
      snapshots[r.snapshot_hash] = (await log.snapshotFiles(r.snapshot_hash)) ?? {};
  }
  return snapshots;
}

async function settlementsOf(db: Database, records: StoredRecord[]): Promise<AuditBundle['settlements']> {
  const orderIds = [...new Set(records.filter((r) => r.subject).map((r) => r.subject!))];
  const settlements: AuditBundle['settlements'] = {};
  for (const row of await db.query<{ id: string; settlement: unknown }>(
    'SELECT id, settlement FROM orders WHERE id = ANY($1)',
    [orderIds],
  ))
    settlements[row.id] = row.settlement;
  return settlements;
}

function bundleRecord(r: StoredRecord): BundleRecord {
  return {
    seq: r.seq,
    id: r.id,
    kind: r.kind,
    snapshot_hash: r.snapshot_hash,
    subject: r.subject,
    record: r.record,
    record_hash: r.record_hash,
    prev_chain_hash: r.prev_chain_hash,
    chain_hash: r.chain_hash,
    format: r.format,
    created_at: r.created_at_text,
  };
}

async function selectRecords(db: Database, log: AuditLog, selection: BundleSelection): Promise<StoredRecord[]> {
  const byId = new Map<string, StoredRecord>();
  const add = (rows: Array<StoredRecord | undefined>) => {
    for (const r of rows) if (r) byId.set(r.id, r);
  };
  if (selection.order) {
    const found = await log.lookup(selection.order);
    if (!found) throw new Error(`no order ${selection.order}`);
    add(found.records);
    const [order] = await db.query<{ quote_id: string | null }>('SELECT quote_id FROM orders WHERE id = $1', [
      selection.order,
    ]);
    if (order?.quote_id) add((await log.lookup(order.quote_id))?.records ?? []);
  }
  if (selection.quote) {
    const found = await log.lookup(selection.quote);
    if (!found) throw new Error(`no quote ${selection.quote}`);
    add(found.records);
  }
  if (selection.since || selection.until) {
    let beforeSeq: string | undefined;
    for (;;) {
      const rows = await log.list({ limit: 1000, beforeSeq, since: selection.since, until: selection.until });
      add(rows);
      if (rows.length < 1000) break;
      beforeSeq = rows[rows.length - 1].seq;
    }
  }
  return [...byId.values()].filter(
    (r) =>
      (EVALUATION_KINDS as readonly string[]).includes(r.kind) || r.kind === 'order_state' || r.kind === 'refund_sent',
  );
}

async function signedHeadCovering(db: Database, seq: string, signer?: HeadSigner): Promise<SignedHead> {
  // Instances in development each have their own key: only a head signed with this one is shipped with its public key.
  const [kept] = await db.query<{ document: string; signature: string }>(
    "SELECT document, signature FROM audit_signed_heads WHERE seq >= $1 AND document::jsonb ->> 'key_id' = " +
      '$2 ORDER BY seq LIMIT 1',
    [seq, signer?.keyId ?? ''],
  );
  if (kept && signer)
    return { head: JSON.parse(kept.document), signature: kept.signature, public_key: signer.publicKeyPem };
  if (!signer)
    throw new Error(
      'exporting needs the operator signing key (AUDIT_SIGNING_KEY, AUDIT_SIGNING_KEY_FILE, or ' +
        'DATA_DIR/audit-signing-key.pem)',
    );
  return signCurrentHead(db, signer);
}
