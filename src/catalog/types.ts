export type ParameterType = 'number' | 'integer' | 'boolean' | 'string' | 'url' | 'duration' | 'quantity';

export interface ParameterDescriptor {
  type: ParameterType;
  required: boolean;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  description?: string;
}

/** A product exactly as the API publishes it (spec 2.1). */
export interface Product {
  id: string;
  name: string;
  type: string;
  billing_type: 'subscription' | 'quote' | 'one_time';
  status: 'available' | 'ready' | 'pending' | 'planned' | 'disabled';
  pricing_status: 'approved' | 'pending';
  visibility?: { human: boolean; agent: boolean };
  orderable: { human: boolean; agent: boolean };
  description?: string;
  pricing: Record<string, unknown> & {
    basis: string;
    currency: string;
    model?: string;
    quote_ttl_seconds?: number;
    formula?: string;
    transfer_policy?: string;
  };
  parameters: Record<string, ParameterDescriptor>;
  limits: Record<string, unknown>;
  fulfillment?: Record<string, unknown>;
  payment: { human: string[]; machine: string[]; machine_payment_available: boolean };
}

/** A product plus what only the service needs to know about it. */
export interface CatalogProduct {
  product: Product;
  /**
   * Parameters accepted in quotes and orders: the published ones plus unlisted ones (spec 2.3, instant-stream
   * transfer_gb).
   */
  acceptedParameters: Record<string, ParameterDescriptor>;
  file: string;
}

export interface CatalogSettings {
  catalog_version: number;
  service: string;
  provider: string;
  region: string;
  human_checkout: boolean;
  panel_provider: string;
  order_limits: { currency: string; minimum: string; maximum: string };
  exchange_rates: Record<string, string>;
  products: string[];
  /** Upgrade paths: a service of the key's product can become one of the listed products. */
  upgrades?: Record<string, string[]>;
  /**
   * Extensions of paid time (POST /services/{id}/extend): how long after its expiry a service may still be extended.
   */
  extensions?: { grace_hours?: number };
  /** What one API key, and one paying address, may hold at once (checked by rules of the buyer stage). */
  buyer_limits?: { per_key?: BuyerLimit; per_payer?: BuyerLimit };
  /** A stopped service's refund: nothing below this amount (USD, paid in USDC) is sent (rules/refunds.json). */
  refunds?: { minimum: string };
  /** Stream capacity kept for wallets with paid history (rules/buyer-limits.json): what a newcomer may fill. */
  capacity_reserve?: CapacityReserve;
}

export interface CapacityReserve {
  /** Share (0 to 1) of the host's stream slots and listener places an order from a newcomer may fill. */
  newcomer_share: number;
  /** A wallet is established once it has paid minimum_paid USD (settled, less refunds) at least paid_hours_ago ago. */
  established_payer: { minimum_paid: string; paid_hours_ago: number };
}

export interface BuyerLimit {
  live_services?: number;
  listener_places?: number;
}

export interface Catalog {
  settings: CatalogSettings;
  products: CatalogProduct[];
  byId: Map<string, CatalogProduct>;
}
