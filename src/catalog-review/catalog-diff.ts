import { CATALOG_FILE, SourceFile } from '../catalog/index.js';
import type { Snapshot } from '../pricing/index.js';
import { fieldChanges, type FieldChange } from './field-changes.js';
import { startPricing } from './price-points.js';
import { changes, priceTable, type PriceRow } from './price-table.js';
import { ruleChanges, type RuleChange } from './rule-changes.js';

export interface ProductDiff {
  product_id: string;
  status: 'added' | 'removed' | 'changed' | 'unchanged';
  fields: FieldChange[];
  /** Changed rules that fired for this product, before or after. */
  rules: RuleChange[];
  configurations: number;
  /** Only the configurations whose price or orderability changes. */
  changed_rows: PriceRow[];
}

export interface CatalogDiff {
  before_hash: string;
  after_hash: string;
  settings: FieldChange[];
  rules: RuleChange[];
  products: ProductDiff[];
  prices_change: boolean;
}

/**
 * What an edit changes: per product the fields, the rules, and the price of the same grid of configurations before and
 * after.
 */
export async function diffSnapshots(
  before: Snapshot,
  after: Snapshot,
  onProgress?: (productId: string, done: number, total: number) => void,
): Promise<CatalogDiff> {
  startPricing();
  const rules = ruleChanges(before.files, after.files);
  const ids = [...new Set([...after.catalog.settings.products, ...before.catalog.settings.products])];
  const products: ProductDiff[] = [];
  for (const id of ids) {
    const old = before.catalog.byId.get(id);
    const now = after.catalog.byId.get(id);
    const table = await priceTable(id, before, after, onProgress && ((done, total) => onProgress(id, done, total)));
    const fields = fileChanges(before, old?.file, after, now?.file);
    const fired = rules.filter((r) => table.firedRules.has(r.rule));
    const changed_rows = table.rows.filter(changes);
    const status = !old
      ? 'added'
      : !now
        ? 'removed'
        : fields.length || fired.length || changed_rows.length
          ? 'changed'
          : 'unchanged';
    products.push({
      product_id: id,
      status,
      fields: old && now ? fields : [],
      rules: fired,
      configurations: table.configurations,
      changed_rows,
    });
  }
  return {
    before_hash: before.hash,
    after_hash: after.hash,
    settings: fileChanges(before, CATALOG_FILE, after, CATALOG_FILE),
    rules,
    products,
    prices_change: products.some((p) => p.changed_rows.length > 0),
  };
}

/** The fields that differ between two files; none without parsing them when their texts are the same. */
function fileChanges(
  before: Snapshot,
  file: string | undefined,
  after: Snapshot,
  otherFile: string | undefined,
): FieldChange[] {
  if (file !== undefined && file === otherFile && before.files[file] === after.files[file]) return [];
  return fieldChanges(parsed(before, file), parsed(after, otherFile));
}

function parsed(snapshot: Snapshot, file: string | undefined): unknown {
  return file === undefined ? undefined : new SourceFile(file, snapshot.files[file]).value;
}
