import { catalogFileSchema, productFileSchema } from './schemas.js';

/**
 * The JSON Schemas of the catalog files as published in schemas/ for editors (yaml-language-server), generated from
 * the schemas the service validates with, so the two cannot drift apart (scripts/generate-schemas.ts writes them).
 */
export function publishedSchemas(): Record<string, Record<string, unknown>> {
  const publish = (schema: Record<string, unknown>, title: string) => {
    const { $id: _id, ...rest } = schema;
    return { $schema: 'https://json-schema.org/draft/2020-12/schema', title, ...rest };
  };
  return {
    'catalog.schema.json': publish(catalogFileSchema, 'agent-audio catalog settings (catalog/catalog.yaml)'),
    'product.schema.json': publish(productFileSchema, 'agent-audio product (catalog/products/<id>.yaml)'),
  };
}

/** The text of a published schema file. */
export function schemaText(schema: Record<string, unknown>): string {
  return `${JSON.stringify(schema, null, 2)}\n`;
}
