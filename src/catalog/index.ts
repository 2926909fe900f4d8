export { loadCatalog, CATALOG_FILE } from './load.js';
export { SourceFile, formatDiagnostic, formatDiagnosticWithSource, type Diagnostic } from './source.js';
export { parametersSchema, descriptorSchema } from './parameters.js';
export type {
  CapacityReserve,
  Catalog,
  CatalogProduct,
  CatalogSettings,
  Product,
  ParameterDescriptor,
} from './types.js';
export { productRequiredFields, productStateSchemas } from './schemas.js';
export { autoDjOffer } from './autodj-offer.js';
export { publishedSchemas, schemaText } from './published-schemas.js';
// LiveSnapshot, the hot reload of catalog/ and rules/, is imported from ./live-snapshot.js itself: it opens snapshots
// with pricing/, which reads this index.
