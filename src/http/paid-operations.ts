import { declareDiscoveryExtension } from '@x402/extensions/bazaar';
import { parametersSchema } from '../catalog/index.js';
import { type PlaceOrder, RETENTION_PRODUCT } from '../orders/index.js';
import {
  billingOptions,
  BILLINGS,
  KeyedSnapshotCache,
  SnapshotCache,
  type BillingOption,
  type Snapshot,
} from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { SERVICE_NAME, SERVICE_TAGS } from '../operations/service-name.js';
import { orderResponseSchema } from './response-schemas.js';
import { extendRequestSchema, orderRequestSchema, upgradeRequestSchema } from '../operations/request-schemas.js';

export type PaidOperationName = 'createOrder' | 'upgradeService' | 'extendService';

export interface PaidOperation {
  name: PaidOperationName;
  method: 'POST';
  /** The route under /api/v1, in the bazaar's ":param" form. */
  routeTemplate: string;
  description: string;
  /**
   * The request body's JSON Schema: the server's own request schema, with the catalog's parameter schemas per product.
   */
  inputSchema: Record<string, unknown>;
  inputExample: Record<string, unknown>;
  pathParams?: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  outputExample: Record<string, unknown>;
}

const cache = new SnapshotCache<PaidOperation[]>();

/** The operations that answer 402, as the snapshot being served defines them (billing: billingOptions(snapshot)). */
export function paidOperations(snapshot: Snapshot, billing: Map<string, BillingOption[]>): PaidOperation[] {
  return cache.get(snapshot, () => build(snapshot, billing));
}

const declarations = new KeyedSnapshotCache<ReturnType<typeof declareDiscoveryExtension>>();

/**
 * What POST /orders or POST /services/{id}/upgrade hands to the order machinery for its 402 (bazaar declaration).
 * It declares only the ordered product (its product_id and parameters schema): every product's schemas made the
 * PAYMENT-REQUIRED header ~13 KiB, near HTTP clients' and proxies' header limits. /.well-known/x402 lists them all.
 */
export function discoveryFor(
  snapshot: Snapshot,
  billing: Map<string, BillingOption[]>,
  name: PaidOperationName,
  path: string,
  productId: string,
): NonNullable<PlaceOrder['discovery']> {
  const orderable = orderableById(snapshot).get(productId);
  // A product that cannot be ordered gets no 402; its id (from the request) is not kept.
  const cacheKey = orderable ? `${name}\n${productId}` : name;
  const extensions = declarations.get(snapshot, cacheKey, () => {
    const operation = orderable
      ? forProduct(snapshot, billing, name, orderable)
      : paidOperations(snapshot, billing).find((o) => o.name === name)!;
    return declareDiscoveryExtension({
      bodyType: 'json',
      input: operation.inputExample,
      inputSchema: operation.inputSchema,
      ...(operation.pathParams && { pathParamsSchema: operation.pathParams }),
      output: { schema: operation.outputSchema, example: operation.outputExample },
    });
  });
  const operation = paidOperations(snapshot, billing).find((o) => o.name === name)!;
  return {
    declaration: {
      key: `${snapshot.hash}\n${cacheKey}\n${path}`,
      method: operation.method,
      path,
      routePattern: `/api/v1${operation.routeTemplate}`,
      extensions,
    },
    serviceName: SERVICE_NAME,
    tags: SERVICE_TAGS,
  };
}

/** discoveryFor on the snapshot being served. */
export async function discoveryOf(
  live: LiveSnapshot,
  name: PaidOperationName,
  path: string,
  productId: string,
): Promise<NonNullable<PlaceOrder['discovery']>> {
  const snapshot = live.current;
  return discoveryFor(snapshot, await billingOptions(snapshot), name, path, productId);
}

/** The paid operation as a 402 for one product describes it: that product's id, billings and parameters only. */
function forProduct(
  snapshot: Snapshot,
  billing: Map<string, BillingOption[]>,
  name: PaidOperationName,
  product: OrderableProduct,
): PaidOperation {
  const operation = paidOperations(snapshot, billing).find((o) => o.name === name)!;
  const productId = { enum: [product.id] };
  if (name === 'extendService') {
    return {
      ...operation,
      outputSchema: outline(operation.outputSchema),
      outputExample: exampleOrderResponse(exampleOrder(snapshot, product.id)),
    };
  }
  if (name === 'upgradeService') {
    return {
      ...operation,
      inputSchema: { ...upgradeRequestSchema, properties: { product_id: productId } },
      inputExample: { product_id: product.id },
      outputSchema: outline(operation.outputSchema),
      outputExample: exampleOrderResponse(exampleOrder(snapshot, product.id)),
    };
  }
  const example = {
    ...exampleOrder(snapshot, product.id),
    billing: billing.get(product.id)?.find((o) => o.agent_orderable)?.billing ?? 'one_time',
  };
  return {
    ...operation,
    inputSchema: {
      ...orderRequestSchema,
      properties: {
        ...orderRequestSchema.properties,
        product_id: productId,
        billing: billingSchema([product.id], billing),
        parameters: product.parameters,
      },
    },
    inputExample: example,
    outputSchema: outline(operation.outputSchema),
    outputExample: exampleOrderResponse(example),
  };
}

/**
 * The response schema as a 402 declares it: its fields and their objects' required fields, without descriptions
 * (the whole of it, 2.4 kB, is OrderResponse in /openapi.json and in /.well-known/x402).
 */
function outline(schema: Record<string, unknown>, depth = 1): Record<string, unknown> {
  const {
    description: _,
    properties,
    ...rest
  } = schema as {
    description?: string;
    properties?: Record<string, Record<string, unknown>>;
    type?: unknown;
    required?: unknown;
  };
  if (!properties) return rest;
  if (depth === 0) return { type: rest.type, ...(rest.required !== undefined && { required: rest.required }) };
  return {
    ...rest,
    properties: Object.fromEntries(
      Object.entries(properties).map(([name, property]) => [name, outline(property, depth - 1)]),
    ),
  };
}

type OrderableProduct = ReturnType<typeof orderableProducts>[number];
const orderableCache = new SnapshotCache<Map<string, OrderableProduct>>();

function orderableById(snapshot: Snapshot): Map<string, OrderableProduct> {
  return orderableCache.get(snapshot, () => new Map(orderableProducts(snapshot).map((p) => [p.id, p])));
}

/** Products an agent can order now with POST /orders (retention is bought per service), with their parameters. */
export function orderableProducts(snapshot: Snapshot) {
  return snapshot.catalog.products
    .filter((p) => snapshot.verdicts.get(p.product.id)!.notOrderable.length === 0 && p.product.id !== RETENTION_PRODUCT)
    .map((p) => ({ id: p.product.id, parameters: parametersSchema(p.acceptedParameters) }));
}

/** The order request schema the server validates with, narrowed to the orderable products and their parameters. */
export function orderInputSchema(snapshot: Snapshot, billing: Map<string, BillingOption[]>): Record<string, unknown> {
  const products = orderableProducts(snapshot);
  return {
    ...orderRequestSchema,
    properties: {
      ...orderRequestSchema.properties,
      product_id: { enum: products.map((p) => p.id), description: 'An orderable product (GET /products).' },
      billing: billingSchema(
        products.map((p) => p.id),
        billing,
      ),
    },
    allOf: products.map((p) => ({
      if: { properties: { product_id: { const: p.id } } },
      then: { properties: { parameters: p.parameters } },
    })),
  };
}

function build(snapshot: Snapshot, billing: Map<string, BillingOption[]>): PaidOperation[] {
  const products = orderableProducts(snapshot);
  const perOrder =
    products.find((p) => snapshot.catalog.byId.get(p.id)?.product.billing_type !== 'subscription') ?? products[0];
  const example = exampleOrder(snapshot, perOrder?.id ?? 'instant-stream');
  return [
    {
      name: 'createOrder',
      method: 'POST',
      routeTemplate: '/orders',
      description:
        'Order a live stream or AutoDJ and pay with x402 (send Authorization: Bearer <agent API key> and an ' +
        'Idempotency-Key).',
      inputSchema: orderInputSchema(snapshot, billing),
      inputExample: example,
      outputSchema: orderResponseSchema,
      outputExample: exampleOrderResponse(example),
    },
    {
      name: 'upgradeService',
      method: 'POST',
      routeTemplate: '/services/:service_id/upgrade',
      description: 'Turn a service you own into another product for the rest of its paid time, paid with x402.',
      inputSchema: {
        ...upgradeRequestSchema,
        properties: {
          product_id: {
            enum: products.map((p) => p.id),
            description: upgradeRequestSchema.properties.product_id.description,
          },
        },
      },
      inputExample: { product_id: products.find((p) => p.id === 'event-stream')?.id ?? example.product_id },
      pathParams: {
        type: 'object',
        required: ['service_id'],
        properties: { service_id: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' } },
      },
      outputSchema: orderResponseSchema,
      outputExample: exampleOrderResponse({ ...example, product_id: 'event-stream' }),
    },
    {
      name: 'extendService',
      method: 'POST',
      routeTemplate: '/services/:service_id/extend',
      description:
        'Add paid hours to a service you own (its expiry moves by that much), or bring back one that expired ' +
        'within the grace period (it then runs the hours bought from its return), paid with x402. At least ' +
        "the product's minimum duration_hours.",
      inputSchema: extendRequestSchema,
      inputExample: { duration_hours: 1 },
      pathParams: {
        type: 'object',
        required: ['service_id'],
        properties: { service_id: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' } },
      },
      outputSchema: orderResponseSchema,
      outputExample: exampleOrderResponse(example),
    },
  ];
}

/**
 * The billings an agent can order some product with, from the evaluated billing options (never a fixed list); the
 * others are named with the reason, e.g. "annual: radio-directo costs 74.52 USDC, outside the order limits".
 */
export function billingSchema(orderable: string[], billing?: Map<string, BillingOption[]>) {
  if (!billing) return orderRequestSchema.properties.billing;
  const options = orderable.flatMap((id) => (billing.get(id) ?? []).map((o) => ({ ...o, product: id })));
  const offered = BILLINGS.filter((b) => options.some((o) => o.billing === b && o.agent_orderable));
  const refused = options.filter((o) => !o.agent_orderable && !offered.includes(o.billing));
  return {
    enum: offered,
    default: 'one_time',
    description:
      "How this order is paid, one of the product's billing_options." +
      (refused.length
        ? ` Not offered to agents: ${refused.map((o) => `${o.billing} (${o.product}: ${o.reason})`).join('; ')}`
        : ''),
  };
}

/** A valid order body: the product's defaults for its required parameters. */
function exampleOrder(snapshot: Snapshot, productId: string): Record<string, unknown> {
  const product = snapshot.catalog.byId.get(productId);
  const parameters = Object.fromEntries(
    Object.entries(product?.acceptedParameters ?? {})
      .filter(([, d]) => d.required || d.default !== undefined)
      .map(([name, d]) => [name, d.default ?? d.minimum ?? (d.type === 'boolean' ? false : 1)]),
  );
  return {
    product_id: productId,
    billing: 'one_time',
    email: 'agent@example.com',
    station_name: 'Example FM',
    parameters,
  };
}

function exampleOrderResponse(request: Record<string, unknown>): Record<string, unknown> {
  return {
    ok: true,
    order: {
      id: 'ra_0123456789abcdefgh',
      status: 'active',
      product_id: request.product_id,
      billing: request.billing ?? 'one_time',
      configuration: request.parameters ?? {},
      amount: { amount: '2.37', amount_atomic: '2370000', currency: 'USDC', decimals: 6 },
      evaluation_id: 'ev_0123456789ab',
      payment: {
        protocol: 'x402',
        network: 'eip155:8453',
        payer: '0x0000000000000000000000000000000000000001',
        transaction: '0x' + '0'.repeat(64),
        block_number: '1',
      },
      created_at: '2026-01-01T00:00:00.000Z',
    },
    service: {
      service_id: 'svc0123456789',
      status: 'active',
      stream_url: 'https://stream.example.com/svc0123456789',
      expires_at: '2026-01-01T02:00:00.000Z',
      limits: request.parameters ?? {},
    },
    idempotent_replay: false,
  };
}
