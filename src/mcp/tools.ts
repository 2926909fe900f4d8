import { parametersSchema } from '../catalog/index.js';
import { ApiError } from '../errors/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { RETENTION_PRODUCT, type OrderRequest, type PlacedOrder } from '../orders/index.js';
import type { Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { Metrics } from '../observability/index.js';
import type { PaymentTerms } from '../payments/index.js';
import type { QuoteService } from '../quotes/index.js';
import { publicEvent, type EventFeed } from '../events/index.js';
import {
  discoveryDocuments,
  extend,
  order,
  productIdPattern,
  retainRecordings,
  setPlaylist,
  status,
  stop,
  upgrade,
  usage,
  type CheckoutStatus,
  type OperationDeps,
  type PaidCall,
} from '../operations/index.js';
import type { RecordingStorageUsage } from '../recordings/index.js';
import type { ServiceRow } from '../services/index.js';
import type { Caller } from './caller.js';
import type { ToolName } from './tool-schemas.js';
import { toolDiscovery } from './tool-discovery.js';
import { toolResourceUrl } from './x402-binding.js';

/** What the tools use of the service: the operations' objects, as the REST routes have them, and the catalog's. */
export type McpDeps = OperationDeps & {
  live: LiveSnapshot;
  keys: ApiKeys;
  quotes: QuoteService;
  checkout: CheckoutStatus;
  logError: (fields: Record<string, unknown>, message: string) => void;
  metrics?: Metrics;
  publicBaseUrl: () => string;
  events?: { feed: EventFeed };
  paymentTerms?: PaymentTerms;
  /** Wallet sign-in: a service's tools then also accept the wallet that paid for it. */
  callers?: Callers;
  /** The recordings' storage, in the usage document. */
  recordingStorage?: RecordingStorageUsage;
};

export interface ToolCall {
  /** The arguments, checked against the tool's argument schema (defaults filled in). */
  args: Record<string, any>;
  caller: Caller;
  /** The x402 payment sent with the call, in its PAYMENT-SIGNATURE form. */
  payment?: string;
}

export interface ToolOutcome {
  body: Record<string, unknown>;
  paymentResponse?: string;
}

export interface Tool {
  name: ToolName;
  title: string;
  description: string;
  readOnly: boolean;
  /** Paid with x402: declared in tools/list (_meta.x402), and its calls may carry a payment. */
  paid?: boolean;
  run(call: ToolCall, deps: McpDeps): Promise<ToolOutcome>;
}

const productId = new RegExp(productIdPattern);
const PAYMENT_HOW =
  'Paid with x402 v2 (USDC): called without a payment it returns an error result whose structuredContent is ' +
  'the x402 PaymentRequired; sign a PaymentPayload for it and call again with the same arguments (same ' +
  'idempotency_key) and the payload in params._meta["x402/payment"]. The settlement is in ' +
  '_meta["x402/payment-response"] of the result. The official x402 client refuses payments above $1 unless ' +
  'setSpendControls raises maxAmountPerPayment; many orders cost more. Needs "Authorization: Bearer <API ' +
  'key>" on the HTTP transport.';
const ORDER_DESCRIPTION =
  `Orders a product (as POST /api/v1/orders, the same orders, idempotency and receipts): returns the order and ` +
  `the service with its listener and broadcast URLs. ${PAYMENT_HOW}`;
const EXTEND_DESCRIPTION =
  `Adds duration_hours of paid time to a service you bought (as POST /api/v1/services/{service_id}/extend): ` +
  `the expiry moves from the current expiry, the stream and listeners stay connected; an expired service comes ` +
  `back within the grace period (same mount and credentials) and runs for the hours bought from the moment it ` +
  `comes back. duration_hours is at least the product's minimum duration_hours (1 h in most products). The ` +
  `price is the product's price for the new total of hours minus its price for the hours paid, at least the ` +
  `order minimum. The payment is made out for this service (resource mcp://tool/extend_service?service_id=…): ` +
  `it pays no other. ${PAYMENT_HOW}`;
const RETAIN_DESCRIPTION =
  `Keeps a service's finished recordings past the service's end for retention_days more days (as POST ` +
  `/api/v1/services/{service_id}/recordings/retention, the audio-storage-api product): all of them, or those in ` +
  `recording_ids. The price is the product's base plus ceil(GiB) x days x its GB-day rate; buying again adds ` +
  `days. Not refunded once applied. The payment is made out for this service (resource ` +
  `mcp://tool/retain_recordings?service_id=…): it pays no other. ${PAYMENT_HOW}`;
const UPGRADE_DESCRIPTION =
  `Turns a service into another product for its remaining time (as POST ` +
  `/api/v1/services/{service_id}/upgrade). The payment is made out for this service (resource ` +
  `mcp://tool/upgrade_service?service_id=…): it pays no other. ${PAYMENT_HOW}`;

/** What sets one paid tool on a service apart: the product its payment is made out for, and the operation it calls. */
interface PaidServiceTool {
  name: ToolName;
  title: string;
  description: string;
  soldAs: (args: ToolCall['args'], service: ServiceRow) => string;
  place: (deps: McpDeps, args: ToolCall['args'], call: OwnedPaidCall) => Promise<PlacedOrder>;
}

/** The part every paid call on a service has: the service, checked to be the caller's, the key and the payment. */
interface OwnedPaidCall {
  service: ServiceRow;
  idempotencyKey: string;
  payment: PaidCall;
}

/** A paid tool on a service the caller owns: the payment is made out for that service and passed to the operation. */
function paidServiceTool(tool: PaidServiceTool): Tool {
  const { name, title, description } = tool;
  return {
    name,
    title,
    description,
    readOnly: false,
    paid: true,
    run: async ({ args, caller, payment: sent }, deps) => {
      const service = await owned(args.service_id, caller, deps);
      const payment = paidCall(deps, sent, name, description, tool.soldAs(args, service), service.id);
      const placed = await tool.place(deps, args, { service, idempotencyKey: args.idempotency_key, payment });
      return { body: placed.body, paymentResponse: placed.paymentResponse };
    },
  };
}

export const tools: Tool[] = [
  {
    name: 'list_products',
    title: 'List products',
    readOnly: true,
    description:
      'Every product with its parameters, limits, price basis and payment methods (as GET /api/v1/products). Public.',
    run: async (_call, deps) => ({ body: json(discoveryDocuments(deps.live.current, deps.checkout).products) }),
  },
  {
    name: 'describe_product',
    title: 'Describe a product',
    readOnly: true,
    description:
      'One product (as GET /api/v1/products/{product_id}), with parameters_schema: the JSON Schema its ' +
      'parameters are validated with. Public.',
    run: async ({ args }, deps) => {
      const id = args.product_id as string;
      const snapshot = deps.live.current;
      const body = productId.test(id) ? discoveryDocuments(snapshot, deps.checkout).product.get(id) : undefined;
      const entry = snapshot.catalog.byId.get(id);
      if (!body || !entry)
        throw new ApiError(
          404,
          'product_not_found',
          `There is no product ${JSON.stringify(id).slice(0, 100)}. The list_products tool lists every product id.`,
        );
      return { body: { ...json(body), parameters_schema: parametersSchema(entry.acceptedParameters) } };
    },
  },
  {
    name: 'quote',
    title: 'Quote a configuration',
    readOnly: true,
    description:
      'The exact USDC price of a product configuration, with its breakdown and expiry (as POST ' +
      '/api/v1/quotes); creates no order. Put quote.id in metadata.quote_id of the order tool to pay this ' +
      'price until expires_at_quote. Needs "Authorization: Bearer <API key>" on the HTTP transport.',
    run: async ({ args, caller }, deps) => {
      const key = await caller.keyForWrite();
      const { idempotency_key: idempotencyKey, product_id: product, parameters } = args;
      const { quoteText, replayed } = await deps.quotes
        .create({ apiKeyId: key.id, idempotencyKey, input: { product_id: product, parameters: parameters ?? {} } })
        .catch((e) => {
          throw caller.revokedDuring(e);
        });
      if (!replayed) deps.metrics?.quotes.inc({ product });
      return {
        body: {
          ok: true,
          quote: JSON.parse(quoteText) as Record<string, unknown>,
          ...(idempotencyKey !== undefined && { idempotency: { key: idempotencyKey, replayed } }),
        },
      };
    },
  },
  {
    name: 'order',
    title: 'Order and pay',
    readOnly: false,
    paid: true,
    description: ORDER_DESCRIPTION,
    run: async ({ args, caller, payment }, deps) => {
      const key = await caller.keyForWrite();
      const { idempotency_key: idempotencyKey, ...request } = args;
      const productId = String(request.product_id);
      const paid = paidCall(deps, payment, 'order', ORDER_DESCRIPTION, productId);
      const placed = await order(deps, {
        apiKeyId: key.id,
        idempotencyKey,
        request: request as OrderRequest,
        payment: paid,
      }).catch((e) => {
        throw caller.revokedDuring(e);
      });
      return { body: placed.body, paymentResponse: placed.paymentResponse };
    },
  },
  {
    name: 'service_status',
    title: 'Service status',
    readOnly: true,
    description:
      'A service you bought: status, listener and broadcast URLs (Icecast, and HLS at endpoints.hls_url), ' +
      'its public listen page (listen.page, listen.embed; HLS at listen.hls_url), what plays now ' +
      '(listen.now_playing), limits, expiry, and the evaluations that priced it (as GET ' +
      '/api/v1/services/{service_id} and …/now-playing). Needs the API key that ordered it.',
    run: async ({ args, caller }, deps) => {
      const service = await owned(args.service_id, caller, deps);
      const { service: document, ...rest } = await status(deps, service);
      const listen = {
        page: document.endpoints?.listen_page ?? null,
        embed: document.endpoints?.listen_embed ?? null,
        hls_url: document.endpoints?.hls_url ?? null,
        now_playing: deps.nowPlaying ? await deps.nowPlaying.current(service.id) : null,
      };
      const { ok, ...after } = rest;
      return { body: { ok, service: document, listen, ...after } };
    },
  },
  {
    name: 'service_usage',
    title: 'Service usage',
    readOnly: true,
    description:
      'Listeners, listener-hours, bytes, transfer used against bought, the source and storage of a service ' +
      '(as GET /api/v1/services/{service_id}/usage). Needs the API key that ordered it.',
    run: async ({ args, caller }, deps) => {
      return { body: await usage(deps, await owned(args.service_id, caller, deps)) };
    },
  },
  paidServiceTool({
    name: 'upgrade_service',
    title: 'Upgrade a service',
    description: UPGRADE_DESCRIPTION,
    soldAs: (args) => args.product_id,
    place: (deps, args, call) => upgrade(deps, { ...call, productId: args.product_id }),
  }),
  paidServiceTool({
    name: 'extend_service',
    title: 'Extend a service',
    description: EXTEND_DESCRIPTION,
    soldAs: (_args, service) => service.product_id,
    place: (deps, args, call) => extend(deps, { ...call, hours: args.duration_hours }),
  }),
  paidServiceTool({
    name: 'retain_recordings',
    title: "Keep a service's recordings past its end",
    description: RETAIN_DESCRIPTION,
    soldAs: () => RETENTION_PRODUCT,
    place: (deps, args, call) =>
      retainRecordings(deps, { ...call, days: args.retention_days, recordingIds: args.recording_ids }),
  }),
  {
    name: 'stop_service',
    title: 'Stop a service and get the unused share back',
    readOnly: false,
    description:
      'Stops a service you bought before it expires (as POST /api/v1/services/{service_id}/stop): its mount, ' +
      'source and listeners are cut at once and for good, and every unused hour you paid for, at the rate ' +
      'you bought it (the base fee of the order and the transfer used are kept, nothing below the minimum) ' +
      'is refunded in USDC to the wallet that paid. Returns the refund: amount, status (pending until proven ' +
      'on chain, then sent with its transaction and a signed receipt). Calling it again returns the same ' +
      'refund. Needs the API key that ordered it, or the paying wallet signed in.',
    run: async ({ args, caller }, deps) => {
      return { body: await stop(deps, await owned(args.service_id, caller, deps)) };
    },
  },
  {
    name: 'service_events',
    title: 'Events of a service',
    readOnly: true,
    description:
      'The events of a service you bought, in order (as GET /api/v1/services/{service_id}/events streams ' +
      'them): order.paid, service.active, source.connected, source.disconnected, listeners.threshold, ' +
      'service.expiring, service.suspended, service.expired, upgrade.applied, service.extended, ' +
      'service.stopped, refund.sent, refund.failed, track.changed, service.moved. Returns those after ' +
      'last_event_id, waiting up to wait_seconds for one when there is none yet; call again with the last id ' +
      'to follow the service. Webhooks (POST /api/v1/webhooks) push the same events. Needs the API key that ' +
      'ordered it, or the paying wallet signed in.',
    run: async ({ args, caller }, deps) => {
      const service = await owned(args.service_id, caller, deps);
      const events = await eventsAfter(deps, service.id, args.last_event_id, args.wait_seconds ?? 20);
      return {
        body: {
          ok: true,
          service_id: service.id,
          events,
          last_event_id: events.at(-1)?.id ?? args.last_event_id ?? null,
        },
      };
    },
  },
  {
    name: 'set_playlist',
    title: 'Set the AutoDJ playlist',
    readOnly: false,
    description:
      'Sets the AutoDJ playlist of a service to files already uploaded (PUT ' +
      '/api/v1/services/{service_id}/files/{name}), as PUT /api/v1/services/{service_id}/playlist. Needs the ' +
      'API key that ordered it.',
    run: async ({ args, caller }, deps) => {
      const service = await owned(args.service_id, caller, deps);
      return { body: await setPlaylist(deps, service, args.playlist, args.shuffle) };
    },
  },
];

export const toolsByName = new Map(tools.map((t) => [t.name as string, t]));

async function owned(serviceId: string, caller: Caller, deps: McpDeps): Promise<ServiceRow> {
  const service = await caller.ownedService(deps.services, serviceId);
  if (!service)
    throw new ApiError(
      404,
      'service_not_found',
      'There is no service with this id for your API key or signed-in wallet. Use service.service_id from your order.',
    );
  return service;
}

/**
 * A service's events after `lastEventId`, waiting up to `waitSeconds` for the first when there is none yet: the MCP
 * endpoint is stateless (one JSON answer per request), so events are read, not pushed; webhooks and SSE push them.
 */
async function eventsAfter(deps: McpDeps, serviceId: string, lastEventId: string | undefined, waitSeconds: number) {
  const feed = deps.events?.feed;
  if (!feed)
    throw new ApiError(
      503,
      'events_not_available',
      'Events are not available on this deployment. Read the service with service_status instead.',
      { retryable: true },
    );
  const after = lastEventId ? await feed.position(serviceId, lastEventId) : undefined;
  if (lastEventId && !after) {
    throw new ApiError(
      422,
      'unknown_last_event_id',
      `${lastEventId} is not an event of this service. Send the id of an event you received from it, or no ` +
        `last_event_id for every event from the first.`,
    );
  }
  let events = await feed.read(serviceId, after);
  if (!events.length && waitSeconds > 0) {
    for await (const first of feed.subscribe(serviceId, after, AbortSignal.timeout(waitSeconds * 1000))) {
      events = [first, ...(await feed.read(serviceId, first))];
      break;
    }
  }
  return events.map(publicEvent);
}

/** A paid tool call as the operations take it: its payment, the resource it buys and its bazaar declaration. */
function paidCall(
  deps: McpDeps,
  signature: string | undefined,
  tool: ToolName,
  description: string,
  productId: string,
  serviceId?: string,
): PaidCall {
  return {
    signature,
    resourceUrl: toolResourceUrl(tool, serviceId),
    discovery: toolDiscovery(deps.live.current, tool, description, productId),
  };
}

function json(body: Buffer): Record<string, unknown> {
  return JSON.parse(body.toString('utf8')) as Record<string, unknown>;
}
