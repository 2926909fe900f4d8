import { SnapshotCache, type BillingOption, type Snapshot } from '../pricing/index.js';

export interface CheckoutStatus {
  available: boolean;
  configured: boolean;
  protocol: 'x402';
  network: string;
  reason?: string;
}

export interface DiscoveryDocuments {
  products: Buffer;
  product: Map<string, Buffer>;
  pricing: Buffer;
  availability: Buffer;
}

const cache = new SnapshotCache<DiscoveryDocuments>();

/** The discovery bodies only change with the snapshot: serialise them once per snapshot. */
export function discoveryDocuments(
  snapshot: Snapshot,
  checkout: CheckoutStatus,
  billing = new Map<string, BillingOption[]>(),
): DiscoveryDocuments {
  return cache.get(snapshot, () => build(snapshot, checkout, billing));
}

function build(
  snapshot: Snapshot,
  checkout: CheckoutStatus,
  billing: Map<string, BillingOption[]>,
): DiscoveryDocuments {
  const { settings, products } = snapshot.catalog;
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  // Which billings the rules accept and agents can order (e.g. radio-directo annual is above the order maximum).
  const billingOf = (id: string) => (billing.has(id) ? { billing_options: billing.get(id) } : {});
  const published = products.map((p) => ({ ...p.product, ...billingOf(p.product.id) }));

  const prices = published.map((p) => ({
    product_id: p.id,
    name: p.name,
    status: p.status,
    in_preparation: p.status === 'planned' || p.status === 'pending',
    ...p.pricing,
    pricing_status: p.pricing_status,
    ...billingOf(p.id),
  }));
  const currencies = [...new Set(published.map((p) => p.pricing.currency))].sort();

  const availability = published.map((p) => {
    const verdict = snapshot.verdicts.get(p.id)!;
    const orderable = verdict.notOrderable.length === 0;
    return {
      product_id: p.id,
      status: p.status,
      pricing_status: p.pricing_status,
      agent_orderable: orderable,
      available_now: orderable,
      pricing: p.pricing,
      parameters: p.parameters,
      limits: p.limits,
      fulfillment: p.fulfillment ?? {},
      ...billingOf(p.id),
      reason: orderable
        ? checkout.configured
          ? 'Agents can order this product now.'
          : `Agents can order this product; machine payment on this deployment: ${checkout.reason}`
        : verdict.notOrderable.map((r) => r.reason).join(' '),
    };
  });

  return {
    products: json({
      ok: true,
      catalog_version: settings.catalog_version,
      count: published.length,
      products: published,
    }),
    product: new Map(published.map((p) => [p.id, json({ ok: true, product: p })])),
    pricing: json({ ok: true, currency: currencies.length === 1 ? currencies[0] : null, currencies, prices }),
    availability: json({
      ok: true,
      provider: settings.provider,
      region: settings.region,
      human_checkout: settings.human_checkout,
      // What one API key and one paying address may hold at once, so that an agent can plan before it is refused.
      agent_checkout: {
        ...checkout,
        ...(settings.buyer_limits && { buyer_limits: settings.buyer_limits }),
        ...(settings.capacity_reserve && { capacity_reserve: settings.capacity_reserve }),
      },
      products: availability,
    }),
  };
}
