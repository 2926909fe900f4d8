export { diffSnapshots, type CatalogDiff, type ProductDiff } from './catalog-diff.js';
export { type PriceRow } from './price-table.js';
export { type PricePoint } from './price-points.js';
export { type FieldChange } from './field-changes.js';
export { type RuleChange } from './rule-changes.js';
export { snapshotFilesAtGitRef } from './git-files.js';
