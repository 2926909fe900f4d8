import { SourceFile, type CatalogProduct } from '../catalog/index.js';
import { configurations, SnapshotCache, thresholds, type Snapshot } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import { type Billing, type PricePoint, pricePoint } from './price-points.js';

export type { PricePoint };

export interface PriceRow {
  configuration: Record<string, unknown>;
  billing?: 'monthly' | 'annual';
  before: PricePoint;
  after: PricePoint;
  /** after - before in atomic units, when both are priced. */
  change_atomic?: string;
  /** The change in percent of before, two decimals; absent when before is 0 or either side is not priced. */
  change_percent?: string;
  /** Whether an agent can order this configuration now and could not before, or the reverse. */
  orderability?: 'becomes_orderable' | 'stops_being_orderable';
}

export interface PriceTable {
  configurations: number;
  rows: PriceRow[];
  firedRules: Set<string>;
}

export const GRID = { between: 3, acrossThresholds: true };

/** The same grid of configurations of one product, priced on both versions. */
export async function priceTable(
  id: string,
  before: Snapshot | undefined,
  after: Snapshot | undefined,
  onProgress?: (done: number, total: number) => void,
): Promise<PriceTable> {
  const grid = new Map<string, Record<string, unknown>>();
  const read = new Set([...parametersRulesRead(before), ...parametersRulesRead(after)]);
  for (const snapshot of [before, after]) {
    const entry = snapshot?.catalog.byId.get(id);
    if (!entry) continue;
    const boundsOnly = new Set(Object.keys(entry.acceptedParameters).filter((name) => !read.has(name)));
    for (const c of configurations(entry, thresholds(snapshot!, entry), { ...GRID, boundsOnly })) grid.set(key(c), c);
  }
  const billings = billingsOf(after?.catalog.byId.get(id) ?? before?.catalog.byId.get(id));
  const firedRules = new Set<string>();
  const rows: PriceRow[] = [];
  const total = grid.size * billings.length;
  for (const [configurationKey, configuration] of grid) {
    for (const billing of billings) {
      const b = await pricePoint(before, id, configuration, configurationKey, billing);
      const a = await pricePoint(after, id, configuration, configurationKey, billing);
      for (const rule of [...b.fired, ...a.fired]) firedRules.add(rule);
      rows.push(row(configuration, billing, b.point, a.point));
      onProgress?.(rows.length, total);
    }
  }
  return { configurations: total, rows, firedRules };
}

/** Whether a row shows a change an agent would notice: another price, or another answer to "can I order this?". */
export function changes(row: PriceRow): boolean {
  return row.orderability !== undefined || (row.change_atomic !== undefined && row.change_atomic !== '0');
}

function billingsOf(entry: CatalogProduct | undefined): Billing[] {
  return entry?.product.billing_type === 'subscription' ? ['monthly', 'annual'] : [undefined];
}

function row(
  configuration: Record<string, unknown>,
  billing: Billing,
  before: PricePoint,
  after: PricePoint,
): PriceRow {
  const result: PriceRow = { configuration, ...(billing && { billing }), before, after };
  if (before.priced && after.priced) {
    const change = new Decimal(after.total_atomic).minus(before.total_atomic);
    result.change_atomic = change.toFixed();
    if (!new Decimal(before.total_atomic).isZero())
      result.change_percent = change.times(100).dividedBy(before.total_atomic).toFixed(2);
  }
  const could = before.priced && before.orderable;
  const can = after.priced && after.orderable;
  if (could !== can) result.orderability = can ? 'becomes_orderable' : 'stops_being_orderable';
  return result;
}

/**
 * Parameters that quote rules read (as the params fact or in a derived fact): only these can move a price between their
 * bounds.
 */
function parametersRulesRead(snapshot: Snapshot | undefined): Set<string> {
  return snapshot ? rulesRead.get(snapshot, () => readByRules(snapshot)) : new Set();
}

const rulesRead = new SnapshotCache<Set<string>>();

function readByRules(snapshot: Snapshot): Set<string> {
  const names = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(visit);
      return;
    }
    if (typeof node !== 'object' || node === null) return;
    const record = node as Record<string, unknown>;
    if (record.fact === 'params' && typeof record.path === 'string')
      names.add(record.path.replace(/^\$\./, '').split('.')[0]);
    if (typeof record.param === 'string') names.add(record.param);
    Object.values(record).forEach(visit);
  };
  for (const [path, text] of Object.entries(snapshot.files)) {
    if (path.startsWith('rules/')) visit(new SourceFile(path, text).value);
  }
  return names;
}

function key(configuration: Record<string, unknown>): string {
  return JSON.stringify(
    Object.keys(configuration)
      .sort()
      .map((k) => [k, configuration[k]]),
  );
}
