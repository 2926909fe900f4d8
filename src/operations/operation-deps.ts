import type { MediaLibrary, NowPlaying, ServiceRecords } from '../services/index.js';
import type { OrderService, PlaceOrder } from '../orders/index.js';
import type { Refunds } from '../refunds/index.js';

/**
 * What the operations run on: the same objects whichever transport (REST route or MCP tool) calls them. Each is
 * absent while the deployment does not offer it; the operation that needs it then refuses with a 503 that says so.
 */
export interface OperationDeps {
  orders?: OrderService;
  services?: ServiceRecords;
  /** Stop and refund, and how a stopped service ended. */
  refunds?: Refunds;
  media?: MediaLibrary;
  nowPlaying?: NowPlaying;
  /** Why machine payment is off, for the refusal of a paid operation. */
  checkout?: { reason?: string };
}

/**
 * How a paid call reached us, as its transport names it: the payment it carries (in the PAYMENT-SIGNATURE form), the
 * resource it buys (a URL on REST, mcp://tool/… on MCP) and how its 402 introduces it to x402 discovery.
 */
export interface PaidCall {
  signature?: string;
  resourceUrl: string;
  discovery?: PlaceOrder['discovery'];
}
