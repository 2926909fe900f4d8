/**
 * What makes /openapi.json usable by generated typed clients (openapi-typescript) and validating proxies (Prism):
 * request bodies as one variant per product, defaults that do not make a request property required, and free-form
 * objects that say they are free-form.
 */

type Schema = Record<string, unknown>;

export interface ProductVariant {
  id: string;
  /** The $ref of its parameters schema. */
  parameters: Schema;
  /** Whether the parameters object must be sent (some parameter is required). */
  parametersRequired: boolean;
  /** The billings this request may name for the product; required when the product has no default billing. */
  billings: string[];
  billingRequired: boolean;
}

/**
 * One object schema per product (product_id a const, its own parameters and billings) for a oneOf: generators type a
 * request as a union that checks each product's parameters, where if/then on product_id types them as unknown.
 */
export function productVariants(
  base: Schema & { properties: Record<string, unknown>; required: string[] },
  products: ProductVariant[],
): Schema[] {
  return products.map((product) =>
    withoutDefaults({
      ...base,
      type: 'object',
      additionalProperties: false,
      required: [
        ...base.required,
        ...(product.parametersRequired ? ['parameters'] : []),
        ...(product.billingRequired ? ['billing'] : []),
      ],
      properties: {
        ...base.properties,
        product_id: { const: product.id },
        parameters: product.parameters,
        billing: { enum: product.billings },
      },
    }),
  );
}

/**
 * The schema with every `default` moved into its description: openapi-typescript makes a property with a default
 * required in component schemas, so a client could not leave out a parameter the service fills in itself.
 */
export function withoutDefaults<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(withoutDefaults) as T;
  if (!schema || typeof schema !== 'object') return schema;
  const { default: fallback, ...rest } = schema as Schema;
  const copy = Object.fromEntries(
    Object.entries(rest).map(([key, value]) => [
      key,
      key === 'const' || key === 'enum' ? value : withoutDefaults(value),
    ]),
  );
  if (fallback === undefined) return copy as T;
  const said = `Default when left out: ${JSON.stringify(fallback)}.`;
  return { ...copy, description: typeof copy.description === 'string' ? `${copy.description} ${said}` : said } as T;
}

/**
 * A copy of the document where every object schema without properties says `additionalProperties: true`: generators
 * read `{type: object}` alone as an object that can hold nothing (Record<string, never>).
 */
export function freeFormObjectsOpen<T>(document: T): T {
  const open = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(open);
    if (!value || typeof value !== 'object') return value;
    const copy = Object.fromEntries(
      Object.entries(value).map(([key, inner]) => [
        key,
        ['const', 'enum', 'example', 'examples'].includes(key) ? inner : open(inner),
      ]),
    );
    const isObject = copy.type === 'object' || (Array.isArray(copy.type) && copy.type.includes('object'));
    const shaped = [
      'properties',
      'additionalProperties',
      'patternProperties',
      'oneOf',
      'anyOf',
      'allOf',
      '$ref',
      'const',
    ].some((k) => k in copy);
    return isObject && !shaped ? { ...copy, additionalProperties: true } : copy;
  };
  return open(document) as T;
}
