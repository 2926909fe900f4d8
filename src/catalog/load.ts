import { createAjv, schemaProblems, type ValidateFunction } from '../schema/ajv.js';
import { cachedValidator } from '../schema/validator-cache.js';
import { parametersSchema } from './parameters.js';
import { catalogFileSchema, productFileSchema } from './schemas.js';
import { SourceFile, type Diagnostic } from './source.js';
import type { Catalog, CatalogProduct, CatalogSettings, ParameterDescriptor, Product } from './types.js';

const ajv = createAjv();
const catalogFileValidator = cachedValidator<CatalogSettings>(catalogFileSchema);
const productFileValidator = cachedValidator<Product & { unlisted_parameters?: Record<string, ParameterDescriptor> }>(
  productFileSchema,
);

export const CATALOG_FILE = 'catalog/catalog.yaml';

/**
 * Builds the catalog from its files (path → text, paths like catalog/products/x.yaml), or says file:line:column what is
 * wrong.
 */
export function loadCatalog(files: SourceFile[]): { catalog?: Catalog; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [];
  const settingsFile = files.find((f) => f.path === CATALOG_FILE);
  if (!settingsFile)
    return {
      diagnostics: [
        {
          file: CATALOG_FILE,
          line: 1,
          column: 1,
          message: 'the catalog settings file is missing',
          code: 'missing_catalog_file',
        },
      ],
    };
  const settings = validated(settingsFile, catalogFileValidator(), diagnostics);
  const products: CatalogProduct[] = [];
  // Products whose file exists but is invalid: already reported there, so not reported again as missing elsewhere.
  const invalid = new Set<string>();
  for (const file of files.filter((f) => f.path.startsWith('catalog/products/'))) {
    const product = productOf(file, settings, diagnostics);
    if (product) products.push(product);
    else invalid.add(idFromPath(file.path));
  }
  if (!settings) return { diagnostics };
  const byId = new Map(products.map((p) => [p.product.id, p]));
  const known = (id: string) => byId.has(id) || invalid.has(id);
  checkListing(settingsFile, settings, products, known, diagnostics);
  checkUpgradePaths(settingsFile, settings, known, diagnostics);
  if (diagnostics.length) return { diagnostics };
  const ordered = settings.products.map((id) => byId.get(id)!);
  return {
    catalog: { settings, products: ordered, byId: new Map(ordered.map((p) => [p.product.id, p])) },
    diagnostics,
  };
}

/** One product file, checked on its own and against the settings; undefined when it does not validate. */
function productOf(
  file: SourceFile,
  settings: CatalogSettings | undefined,
  diagnostics: Diagnostic[],
): CatalogProduct | undefined {
  const product = validated(file, productFileValidator(), diagnostics);
  if (!product) return undefined;
  const expectedPath = `catalog/products/${product.id}.yaml`;
  if (file.path !== expectedPath)
    diagnostics.push(
      file.at('/id', `product ${product.id} must live in ${expectedPath}`, 'value', 'product_file_name'),
    );
  checkDescriptors(file, product, diagnostics);
  const provider = product.fulfillment?.provider;
  if (settings && provider !== undefined && provider !== settings.panel_provider && provider !== settings.provider) {
    diagnostics.push(
      file.at(
        '/fulfillment/provider',
        `fulfillment provider ${String(provider)} is neither the panel provider (${settings.panel_provider}) ` +
          `nor the operator (${settings.provider}) named in ${CATALOG_FILE}`,
        'value',
        'unknown_provider',
      ),
    );
  }
  const { unlisted_parameters: unlisted = {}, ...published } = product;
  for (const name of Object.keys(unlisted)) {
    if (name in published.parameters)
      diagnostics.push(
        file.at(
          `/unlisted_parameters/${name}`,
          `${name} is already a published parameter`,
          'key',
          'duplicate_parameter',
        ),
      );
  }
  return { product: published, acceptedParameters: { ...published.parameters, ...unlisted }, file: file.path };
}

/** Every listed product has a file, and every product file is listed. */
function checkListing(
  settingsFile: SourceFile,
  settings: CatalogSettings,
  products: CatalogProduct[],
  known: (id: string) => boolean,
  diagnostics: Diagnostic[],
): void {
  settings.products.forEach((id, i) => {
    if (!known(id))
      diagnostics.push(
        settingsFile.at(
          `/products/${i}`,
          `no file catalog/products/${id}.yaml for listed product ${id}`,
          'value',
          'missing_product_file',
        ),
      );
  });
  for (const p of products) {
    if (!settings.products.includes(p.product.id)) {
      diagnostics.push({
        file: p.file,
        line: 1,
        column: 1,
        message: `product ${p.product.id} is not listed under products in ${CATALOG_FILE}`,
        code: 'unlisted_product',
      });
    }
  }
}

/**
 * The upgrade paths name known products. A product listed without a file is reported by checkListing; an unknown name
 * in the upgrade paths is reported once, where it first appears.
 */
function checkUpgradePaths(
  settingsFile: SourceFile,
  settings: CatalogSettings,
  known: (id: string) => boolean,
  diagnostics: Diagnostic[],
): void {
  const unknownUpgrade = new Set<string>();
  const checkUpgrade = (id: string, pointer: string, at: 'key' | 'value') => {
    if (known(id) || settings.products.includes(id) || unknownUpgrade.has(id)) return;
    unknownUpgrade.add(id);
    diagnostics.push(
      settingsFile.at(
        pointer,
        `upgrade path names unknown product ${id}; list it under products and give it a file ` +
          `catalog/products/${id}.yaml, or remove it here`,
        at,
        'unknown_upgrade_product',
      ),
    );
  };
  for (const [from, targets] of Object.entries(settings.upgrades ?? {})) {
    checkUpgrade(from, `/upgrades/${from}`, 'key');
    targets.forEach((to, i) => checkUpgrade(to, `/upgrades/${from}/${i}`, 'value'));
  }
}

function idFromPath(path: string): string {
  return path.replace(/^catalog\/products\//, '').replace(/\.ya?ml$/, '');
}

function validated<T>(file: SourceFile, validate: ValidateFunction<T>, out: Diagnostic[]): T | undefined {
  if (file.syntaxErrors.length) {
    out.push(...file.syntaxErrors);
    return undefined;
  }
  if (validate(file.value)) return file.value as T;
  for (const p of schemaProblems(validate.errors as never))
    out.push(file.at(p.pointer, p.message, p.atKey ? 'key' : 'value', p.code));
  return undefined;
}

function checkDescriptors(
  file: SourceFile,
  product: Product & { unlisted_parameters?: Record<string, ParameterDescriptor> },
  out: Diagnostic[],
): void {
  for (const group of ['parameters', 'unlisted_parameters'] as const) {
    for (const [name, d] of Object.entries(product[group] ?? {})) {
      const at = `/${group}/${name}`;
      if (d.minimum !== undefined && d.maximum !== undefined && d.minimum > d.maximum)
        out.push(file.at(`${at}/minimum`, `minimum ${d.minimum} is above maximum ${d.maximum}`, 'value', 'bounds'));
      if (d.default !== undefined) {
        const check = ajv.compile(parametersSchema({ [name]: { ...d, default: undefined } }));
        if (!check({ [name]: d.default }))
          out.push(
            file.at(
              `${at}/default`,
              `default ${JSON.stringify(d.default)} is not a valid ${d.type} within the bounds`,
              'value',
              'default',
            ),
          );
      }
    }
  }
  const pricing = product.pricing;
  if (product.billing_type === 'quote' && pricing.currency === 'USDC') {
    if (pricing.decimals !== 6)
      out.push(file.at('/pricing/decimals', 'USDC prices must declare decimals: 6', 'value', 'decimals'));
    if (product.pricing_status === 'approved' && pricing.quote_ttl_seconds === undefined)
      out.push(file.at('/pricing', 'approved quotable USDC products need quote_ttl_seconds', 'value', 'quote_ttl'));
  }
  if (product.pricing_status !== pricing.pricing_status)
    out.push(
      file.at(
        '/pricing/pricing_status',
        `pricing.pricing_status (${pricing.pricing_status}) differs from the product's pricing_status ` +
          `(${product.pricing_status})`,
        'value',
        'pricing_status',
      ),
    );
}
