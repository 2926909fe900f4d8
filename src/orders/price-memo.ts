import { canonicalJson } from '../audit/index.js';
import type { Snapshot } from '../pricing/index.js';
import type { Database } from '../store/index.js';
import { priceOrder, type OrderPrice, type OrderRequest } from './order-price.js';

const MAX_ENTRIES = 1000;

/**
 * priceOrder's answers, kept while the snapshot is the one served: a price depends only on the snapshot (catalog
 * hash), the product, its parameters and the billing, so a 402 for the same request is not evaluated again. A reload
 * is a new snapshot and empties the memo. Not memoized: orders citing a quote (the price is read from the quote)
 * and products with URL parameters (their URLs are resolved and checked every time), and every refusal.
 */
export class PriceMemo {
  private snapshot?: Snapshot;
  private readonly prices = new Map<string, Promise<OrderPrice>>();

  price(snapshot: Snapshot, request: OrderRequest, apiKeyId: string, db: Database): Promise<OrderPrice> {
    const product = snapshot.catalog.byId.get(request.product_id)?.product;
    if (!product || request.metadata?.quote_id !== undefined || hasUrlParameters(product))
      return priceOrder(snapshot, request, apiKeyId, db);
    if (snapshot !== this.snapshot || this.prices.size >= MAX_ENTRIES) {
      this.prices.clear();
      this.snapshot = snapshot;
    }
    const key = canonicalJson({
      product_id: request.product_id,
      parameters: request.parameters ?? {},
      billing: request.billing,
    });
    let price = this.prices.get(key);
    if (!price) {
      price = priceOrder(snapshot, request, apiKeyId, db);
      this.prices.set(key, price);
      price.catch(() => {
        if (this.prices.get(key) === price) this.prices.delete(key);
      });
    }
    return price;
  }
}

function hasUrlParameters(product: { parameters: Record<string, { type: string }> }): boolean {
  return Object.values(product.parameters).some((p) => p.type === 'url');
}
