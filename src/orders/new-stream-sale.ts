import { canonicalJson, priceRecordText, type PriceRecordText } from '../audit/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { OrderRequest, Priced } from './order-price.js';
import { refuseRetentionOrder } from './retention-price.js';
import type { Demand, PricedSale, PricingContext, Provisioning, SaleKind } from './sale-kind.js';
import { serviceLimitsOf, streamLoadOf } from './service-limits.js';

/** A new service (POST /orders, the MCP order tool): priced by the rules or a quote, placed on the pool. */
export class NewStreamSale implements SaleKind {
  readonly changes = { upgrade_of: null };
  readonly newStream = true;

  constructor(readonly request: OrderRequest) {}

  async price({ snapshot, db, apiKeyId, prices }: PricingContext): Promise<PricedSale> {
    refuseRetentionOrder(this.request.product_id);
    const { priced, amountAtomic, quoteId } = await prices.price(snapshot, this.request, apiKeyId, db);
    const { billing } = this.request;
    const request = this.request;
    return {
      priced,
      amountAtomic,
      quoteId,
      billing,
      configuration: priced.output.configuration,
      description: `${priced.product.name} (${priced.product.id}) for ${atomicToAmount(amountAtomic, 6)} USDC`,
      evidence: (id, snapshotHash, at) => ({
        record: { kind: 'order_price' },
        ...orderPriceText(snapshotHash, request, billing, priced)(id, at),
      }),
    };
  }

  demand(sale: PricedSale): Demand {
    return { load: streamLoadOf(serviceLimitsOf(sale.priced.product, sale.configuration)) };
  }

  async stillFits(): Promise<void> {}
}

/** A new stream's service is inserted with its activation (advance.ts); this reads one inserted before. */
export const newStreamProvisioning: Provisioning = {
  newStream: true,
  serviceOf: () => undefined,
  apply: (client, order, services) => services.ofOrder(client, order.id),
};

/** The evaluation record's text of each price PriceMemo keeps (the same Priced for the same sale), less id and time. */
const orderPriceTexts = new WeakMap<Priced, { input: string; text: PriceRecordText }>();

/** priceRecord's text and hash of an order's price, serialized once per memoized price and filled per order. */
function orderPriceText(
  snapshotHash: string,
  request: OrderRequest,
  billing: OrderRequest['billing'],
  priced: Priced,
): PriceRecordText {
  const input = { product_id: request.product_id, parameters: request.parameters ?? {}, billing };
  const key = `${snapshotHash} ${canonicalJson(input)}`;
  const known = orderPriceTexts.get(priced);
  if (known?.input === key) return known.text;
  const text = priceRecordText(snapshotHash, input, priced, 'order_price');
  orderPriceTexts.set(priced, { input: key, text });
  return text;
}
