import type { Catalog, CatalogProduct } from '../catalog/index.js';
import type { CompiledRules, NotOrderableReason, Rejection, StageOutcome } from '../rules/index.js';
import type { ValidateFunction } from '../schema/ajv.js';
import type { SnapshotFiles } from './files.js';

// What an opened snapshot holds, apart from the code that opens it: the checks run while opening (bounds, formula
// text) read it too, and importing it from snapshot.ts made them a cycle.

export interface ProductVerdict {
  /** Why the product cannot be quoted at all (the first rejection by sequence), if so. */
  rejection?: Rejection;
  notOrderable: NotOrderableReason[];
  outcome: StageOutcome;
}

/** One immutable version of catalog + rules, ready to price; identified by its content hash. */
export interface Snapshot {
  hash: string;
  files: SnapshotFiles;
  catalog: Catalog;
  rules: CompiledRules;
  verdicts: Map<string, ProductVerdict>;
  validators: Map<string, ValidateFunction>;
}

/** How many decimals a product's prices are rounded to. */
export function decimalsOf(entry: CatalogProduct): number {
  return Number(entry.product.pricing.decimals ?? 6);
}
