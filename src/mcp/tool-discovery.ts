import { declareDiscoveryExtension } from '@x402/extensions/bazaar';
import { SERVICE_NAME, SERVICE_TAGS } from '../operations/index.js';
import type { PlaceOrder } from '../orders/index.js';
import { KeyedSnapshotCache, type Snapshot } from '../pricing/index.js';
import { publishedSchemas, type ToolName } from './tool-schemas.js';

type Schema = Record<string, unknown>;
const cache = new KeyedSnapshotCache<NonNullable<PlaceOrder['discovery']>>();

/**
 * How a paid tool's PaymentRequired introduces it to x402 discovery (bazaar, MCP form): its name and its tools/list
 * input schema narrowed to the ordered product (its product_id and parameters branch only: every product's made the
 * PaymentRequired ~13 KiB, a header near clients' limits on the REST side).
 */
export function toolDiscovery(
  snapshot: Snapshot,
  name: ToolName,
  description: string,
  productId: string,
): NonNullable<PlaceOrder['discovery']> {
  const published = publishedSchemas(snapshot)[name];
  const known = productsOf(published).includes(productId);
  // An unknown product gets no PaymentRequired; its id (from the call) is not kept.
  const cacheKey = known ? `${name}\n${productId}` : name;
  return cache.get(snapshot, cacheKey, () => {
    const inputSchema = known ? narrowed(published, productId) : published;
    const extensions = declareDiscoveryExtension({
      toolName: name,
      description,
      inputSchema,
      transport: 'streamable-http',
    });
    return {
      // Bazaar's MCP declarations need no HTTP context; the MCP endpoint stands in for it.
      declaration: {
        key: `${snapshot.hash}\nmcp\n${cacheKey}`,
        method: 'POST',
        path: '/api/v1/mcp',
        routePattern: '/api/v1/mcp',
        extensions,
      },
      serviceName: SERVICE_NAME,
      tags: SERVICE_TAGS,
    };
  });
}

function productsOf(schema: Schema): unknown[] {
  return (((schema.properties as Schema).product_id as Schema | undefined)?.enum as unknown[]) ?? [];
}

/** The schema with product_id as this one product and only its parameters branch. */
function narrowed(schema: Schema, productId: string): Schema {
  const properties = schema.properties as Schema;
  const branches = schema.oneOf as Array<{ properties: { product_id: { const: string } } }> | undefined;
  return {
    ...schema,
    properties: { ...properties, product_id: { ...(properties.product_id as Schema), enum: [productId] } },
    ...(branches && { oneOf: branches.filter((b) => b.properties.product_id.const === productId) }),
  };
}
