import {
  loadCatalog,
  parametersSchema,
  SourceFile,
  type Catalog,
  type CatalogProduct,
  type Diagnostic,
} from '../catalog/index.js';
import { compileRules, type CompiledRules } from '../rules/index.js';
import { createAjv, type ValidateFunction } from '../schema/ajv.js';
import { productBoundProblems, type BoundProblem } from './bounds.js';
import { snapshotHash, type SnapshotFiles } from './files.js';
import { checkFormulaText } from './formula-text.js';
import { decimalsOf, type ProductVerdict, type Snapshot } from './snapshot-shape.js';

export type { ProductVerdict, Snapshot };

const ajv = createAjv({ useDefaults: true });

/**
 * What the last opened snapshot parsed and compiled, by content: a reload after one edit re-parses that file only
 * (parsing and compiling every file took most of a reload on a loaded machine). Snapshots never modify either.
 */
let parsedFiles = new Map<string, SourceFile>();
let compiledValidators = new Map<string, ValidateFunction>();

/**
 * A product's verdict and price-bound problems, by what they depend on: its own file, the catalog settings and the
 * rules (every file but the other products'). A reload after a product edit evaluates that product again, not all
 * (the bounds evaluate each product at every candidate configuration: most of a reload's time).
 */
interface ProductChecks {
  verdict: ProductVerdict;
  bounds?: BoundProblem[];
}
let checkedProducts = new Map<string, ProductChecks>();

export async function openSnapshot(files: SnapshotFiles): Promise<{ snapshot?: Snapshot; diagnostics: Diagnostic[] }> {
  const parsed = new Map<string, SourceFile>();
  const sources = Object.keys(files)
    .sort()
    .map((path) => {
      const key = `${path}\0${files[path]}`;
      const source = parsedFiles.get(key) ?? new SourceFile(path, files[path]);
      parsed.set(key, source);
      return source;
    });
  parsedFiles = parsed;
  const { catalog, diagnostics: catalogDiagnostics } = loadCatalog(
    sources.filter((s) => s.path.startsWith('catalog/')),
  );
  const { rules, diagnostics: ruleDiagnostics } = compileRules(sources.filter((s) => s.path.startsWith('rules/')));
  const diagnostics = [...catalogDiagnostics, ...ruleDiagnostics];
  if (!catalog || !rules || diagnostics.length) return { diagnostics };

  const verdicts = new Map<string, ProductVerdict>();
  const validators = new Map<string, ValidateFunction>();
  const compiled = new Map<string, ValidateFunction>();
  const checks = await productChecks(files, catalog, rules);
  for (const entry of catalog.products) {
    verdicts.set(entry.product.id, checks.get(entry)!.verdict);
    const schema = parametersSchema(entry.acceptedParameters);
    const key = JSON.stringify(schema);
    const validate = compiledValidators.get(key) ?? ajv.compile(schema);
    compiled.set(key, validate);
    validators.set(entry.product.id, validate);
  }
  compiledValidators = compiled;
  const snapshot: Snapshot = { hash: snapshotHash(files), files, catalog, rules, verdicts, validators };

  const source = (path: string) => sources.find((s) => s.path === path)!;
  for (const entry of catalog.products) {
    const verdict = verdicts.get(entry.product.id)!;
    if (entry.product.orderable.agent && verdict.notOrderable.length) {
      diagnostics.push(
        source(entry.file).at(
          '/orderable/agent',
          `an agent-orderable product must be agent-visible, ready, have approved pricing and accept x402: ` +
            `${verdict.notOrderable.map((r) => r.code).join(', ')}`,
          'value',
          'not_orderable',
        ),
      );
    }
  }
  diagnostics.push(...checkFormulaText(catalog, sources));
  for (const entry of catalog.products) {
    const checked = checks.get(entry)!;
    checked.bounds ??= await productBoundProblems(snapshot, entry);
    diagnostics.push(...checked.bounds.map((p) => source(p.file).at(p.pointer, p.message, 'value', 'price_bounds')));
  }
  return diagnostics.length ? { diagnostics } : { snapshot, diagnostics };
}

/** Each product's checks, from the last opened snapshot where what they depend on is unchanged. */
async function productChecks(
  files: SnapshotFiles,
  catalog: Catalog,
  rules: CompiledRules,
): Promise<Map<CatalogProduct, ProductChecks>> {
  const isProduct = (path: string) => path.startsWith('catalog/products/');
  const shared = Object.keys(files)
    .filter((path) => !isProduct(path))
    .sort()
    .map((path) => `${path}\0${files[path]}`)
    .join('\0');
  const kept = new Map<string, ProductChecks>();
  const byEntry = new Map<CatalogProduct, ProductChecks>();
  for (const entry of catalog.products) {
    const key = `${shared}\0${entry.file}\0${files[entry.file]}`;
    const checks = checkedProducts.get(key) ?? { verdict: await judgeProduct(entry, catalog, rules) };
    kept.set(key, checks);
    byEntry.set(entry, checks);
  }
  checkedProducts = kept;
  return byEntry;
}

async function judgeProduct(entry: CatalogProduct, catalog: Catalog, rules: CompiledRules): Promise<ProductVerdict> {
  const outcome = await rules.product.evaluate(
    { product: entry.product, settings: catalog.settings },
    decimalsOf(entry),
  );
  return { rejection: outcome.rejections[0], notOrderable: outcome.notOrderable, outcome };
}
