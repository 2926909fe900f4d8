import { parametersSchema, type CatalogProduct } from '../../catalog/index.js';
import type { BillingOption, Snapshot } from '../../pricing/index.js';
import { billingSchema, orderableProducts } from '../paid-operations.js';
import { productVariants, withoutDefaults } from '../openapi-typed.js';
import {
  auditHeadSchema,
  availabilitySchema,
  deletedFileResponseSchema,
  filesResponseSchema,
  healthSchema,
  orderLookupSchema,
  orderResponseSchema,
  orderSchema,
  playlistResponseSchema,
  pricingSchema,
  serviceResponseSchema,
  serviceSchema,
  stopResponseSchema,
  storedFileResponseSchema,
  usageResponseSchema,
  paymentRequiredBodySchema,
  paymentRequirementsSchema,
  wellKnownX402Schema,
} from '../response-schemas.js';
import {
  errorSchema,
  extendRequestSchema,
  orderRequestSchema,
  playlistSchema,
  upgradeRequestSchema,
  productSchema,
  quoteRequestSchema,
  quoteResponseSchema,
} from '../schemas.js';
import { ref } from './common.js';

type Billing = Map<string, BillingOption[]> | undefined;

const schemaName = (id: string) => `Parameters_${id.replace(/-/g, '_')}`;

/** Subscriptions are quoted too (monthly or annual); products planned or with pricing pending are not. */
const quotableProducts = (snapshot: Snapshot) =>
  snapshot.catalog.products.filter((p) => !snapshot.verdicts.get(p.product.id)!.rejection);

/** One Parameters_* schema per quotable product. */
function parameterSchemas(snapshot: Snapshot) {
  return Object.fromEntries(
    quotableProducts(snapshot).map((p) => [
      schemaName(p.product.id),
      withoutDefaults({
        ...parametersSchema(p.acceptedParameters),
        description: `parameters for product_id "${p.product.id}"`,
      }),
    ]),
  );
}

const billingsOf = (p: CatalogProduct) =>
  p.product.billing_type === 'subscription' ? ['monthly', 'annual'] : ['one_time', 'quote'];

/** A product's variant of a request: its parameters schema and the billings it takes. */
function variantOf(snapshot: Snapshot, id: string, billings: (p: CatalogProduct) => string[]) {
  const product = snapshot.catalog.byId.get(id)!;
  const subscription = product.product.billing_type === 'subscription';
  return {
    id,
    parameters: ref(schemaName(id)),
    parametersRequired: Object.values(product.acceptedParameters).some((d) => d.required),
    billings: billings(product),
    billingRequired: subscription,
  };
}

/** The quote and order requests, one variant per product that can be quoted or ordered. */
function requestSchemas(snapshot: Snapshot, billing: Billing) {
  const quotable = quotableProducts(snapshot);
  const orderableIds = orderableProducts(snapshot).map((p) => p.id);
  const variant = (id: string, billings: (p: CatalogProduct) => string[]) => variantOf(snapshot, id, billings);
  const orderableBillingsOf = (p: CatalogProduct) => {
    const offered = billing
      ?.get(p.product.id)
      ?.filter((o) => o.agent_orderable)
      .map((o) => o.billing);
    return offered?.length ? offered : billingsOf(p);
  };
  const { additionalProperties: _q, ...quoteBase } = quoteRequestSchema;
  const { additionalProperties: _o, ...orderBase } = orderRequestSchema;
  return {
    QuoteRequest: {
      ...quoteBase,
      properties: {
        product_id: { ...quoteRequestSchema.properties.product_id, enum: quotable.map((p) => p.product.id) },
      },
      description:
        'One variant per product: parameters follow the Parameters_* schema of the product_id; billing monthly or annual for a subscription.',
      oneOf: productVariants(
        quoteRequestSchema,
        quotable.map((p) => variant(p.product.id, billingsOf)),
      ),
    },
    QuoteResponse: quoteResponseSchema,
    OrderRequest: {
      ...orderBase,
      properties: {
        product_id: { ...orderRequestSchema.properties.product_id, enum: orderableIds },
        billing: withoutDefaults(billingSchema(orderableIds, billing)),
      },
      description: 'One variant per orderable product: parameters follow the Parameters_* schema of the product_id.',
      oneOf: productVariants(
        orderRequestSchema,
        orderableIds.map((id) => variant(id, orderableBillingsOf)),
      ),
    },
  };
}

/** The component schemas of the Discovery, Orders and Services tags, from the schemas the server validates with. */
export function coreSchemas(snapshot: Snapshot, billing: Billing): Record<string, unknown> {
  return {
    Error: errorSchema,
    PaymentRequired: paymentRequiredBodySchema(errorSchema),
    PaymentRequirements: paymentRequirementsSchema,
    Product: productSchema,
    ProductList: {
      type: 'object',
      required: ['ok', 'catalog_version', 'count', 'products'],
      properties: {
        ok: { const: true },
        catalog_version: { type: 'integer' },
        count: { type: 'integer' },
        products: { type: 'array', items: ref('Product') },
      },
    },
    ProductResponse: {
      type: 'object',
      required: ['ok', 'product'],
      properties: { ok: { const: true }, product: ref('Product') },
    },
    Health: healthSchema,
    Pricing: pricingSchema,
    Availability: availabilitySchema,
    ...requestSchemas(snapshot, billing),
    Order: orderSchema,
    Service: serviceSchema,
    OrderResponse: {
      ...orderResponseSchema,
      properties: { ...orderResponseSchema.properties, order: ref('Order'), service: ref('Service') },
    },
    OrderLookup: {
      ...orderLookupSchema,
      properties: {
        ...orderLookupSchema.properties,
        order: ref('Order'),
        service: { oneOf: [ref('Service'), { type: 'null' }] },
      },
    },
    ServiceResponse: {
      ...serviceResponseSchema,
      properties: { ...serviceResponseSchema.properties, service: ref('Service') },
    },
    Usage: usageResponseSchema,
    StopResponse: stopResponseSchema,
    Files: filesResponseSchema,
    StoredFile: storedFileResponseSchema,
    DeletedFile: deletedFileResponseSchema,
    Playlist: playlistSchema,
    PlaylistResponse: playlistResponseSchema,
    UpgradeRequest: upgradeRequestSchema,
    ExtendRequest: extendRequestSchema,
    AuditHead: auditHeadSchema,
    WellKnownX402: wellKnownX402Schema,
    ...parameterSchemas(snapshot),
  };
}
