import type { Snapshot } from '../pricing/index.js';
import type { ServiceRecords, ServiceRow, StreamLoad } from '../services/index.js';
import type { Client, Database } from '../store/index.js';
import type { OrderRequest, Priced } from './order-price.js';
import type { OrderRow } from './order-store.js';
import type { PriceMemo } from './price-memo.js';

// A kind of sale (a new stream, an upgrade, an extension, a retention of recordings) is one implementation of
// SaleKind for selling it and one of Provisioning for delivering the order it sold; order-kind.ts finds an order's. A
// new kind starts here.

/** What a sale is priced on. */
export interface PricingContext {
  snapshot: Snapshot;
  db: Database;
  apiKeyId: string;
  prices: PriceMemo;
}

/** The evaluation record of a price, as the claim appends it to the audit chain. */
export interface PriceEvidence {
  record: { kind: string };
  text: string;
  hash: string;
}

/** What a sale costs and what its order keeps, priced on one snapshot. */
export interface PricedSale {
  priced: Priced;
  amountAtomic: string;
  quoteId?: string;
  billing: OrderRequest['billing'];
  /** The order's configuration: what the service gets (an extension's: its hours only). */
  configuration: Record<string, unknown>;
  /** How the 402 names what is bought. */
  description: string;
  /** The evaluation record of this price under an id, at a time. */
  evidence(id: string, snapshotHash: string, at: Date): PriceEvidence;
}

/** What a sale asks of capacity: its load, and the host it must stay on (its service's) if any. */
export interface Demand {
  load: StreamLoad;
  ownHost?: string;
}

/** One kind of sale, as a paid operation sells it. */
export interface SaleKind {
  /** The request body as the order keeps it; its hash tells a replay from another request under the same key. */
  readonly request: object;
  /** The order's columns naming the service this sale changes (none for a new stream). */
  readonly changes: { upgrade_of: string | null; extension_of?: string; retention_of?: string };
  price(context: PricingContext): Promise<PricedSale>;
  /** What the priced sale needs from the hosts and counts against the buyer's limits. */
  demand(sale: PricedSale): Demand;
  /**
   * A new stream takes the placement and buyer locks with its key's check and is counted as sold at once; a sale of an
   * existing service locks that service first (stillFits) and makes the counts be read again.
   */
  readonly newStream: boolean;
  /** The re-check at claim, under the service's row lock: the service is still what the sale was priced on. */
  stillFits(client: Client, snapshot: Snapshot): Promise<void>;
}

/** How an order of one kind is delivered once paid. */
export interface Provisioning {
  /** A new stream: its service is inserted with its activation (the usual case, one statement). */
  readonly newStream: boolean;
  /** The service the order changes, locked before its settlement (see advance.ts recordPaid). */
  serviceOf(order: OrderRow): string | undefined;
  /** Applies the order to its service (in the caller's transaction) and returns the service as it is then. */
  apply(
    client: Client,
    order: OrderRow,
    services: ServiceRecords,
    limits: Record<string, unknown>,
  ): Promise<ServiceRow>;
}
