import Router from '@koa/router';
import type { RequestListener } from 'node:http';
import Koa from 'koa';
import type { HeadPublisher } from '../audit/index.js';
import type { WalletIdentity } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';
import type { Logger } from '../log/index.js';
import type { Metrics } from '../observability/index.js';
import { billingOptions } from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import type { OrderService } from '../orders/index.js';
import type { PaymentTerms } from '../payments/index.js';
import type { MountDecider } from '../provisioning/index.js';
import type { QuoteService } from '../quotes/index.js';
import type { RecordingStorageUsage } from '../recordings/index.js';
import type { Refunds } from '../refunds/index.js';
import type { HlsManager } from '../hls/index.js';
import type { ListenPages } from '../listen/index.js';
import type { ListenerSessions, MediaLibrary, NowPlaying, ServiceRecords } from '../services/index.js';
import type { CheckoutStatus } from '../operations/discovery-documents.js';
import { auditRoutes } from './audit.js';
import type { CapacityView } from './availability.js';
import { catalogDocumentAt, discoveryRoutes, type HealthReport } from './discovery.js';
import { eventRoutes, type EventsApi } from './events.js';
import { openApiDocument } from './openapi.js';
import { siteOpenApiDocument } from './openapi-site.js';
import type { ErrorLogger } from './error-document.js';
import { envelope, fixedAnswers, type EnvelopeParts } from './envelope.js';
import { ICECAST_CALLBACK_PREFIX, icecastCallbackRoutes } from './icecast-callbacks.js';
import { hlsRoutes } from './hls.js';
import { keyRoutes } from './keys.js';
import { listenRoutes, siteIconRoutes } from './listen.js';
import { serviceProfileRoutes } from './service-profile.js';
import { recordingRoutes } from './recordings.js';
import { recordingRetentionRoutes } from './recording-retention.js';
import { serviceStatsRoutes } from './service-stats.js';
import { orderRoutes } from './orders.js';
import { serviceRoutes } from './services.js';
import { quoteRoutes } from './quotes.js';
import { refundRequestRoutes } from './refund-requests.js';
import { clientAddress } from './client-address.js';
import { rateLimiter, type RateLimits } from './rate-limit.js';
import { wellKnownX402 } from './well-known.js';
import type { ConnectionCap } from './connection-cap.js';

/** An endpoint another room serves under /api/v1 (the MCP server): http mounts it without knowing it. */
export interface MountedEndpoint {
  handle: Koa.Middleware;
}

export const API_PREFIX = '/api/v1';

export interface AppDeps {
  live: LiveSnapshot;
  keys: ApiKeys;
  quotes: QuoteService;
  checkout: CheckoutStatus;
  version: string;
  checkHealth: () => Promise<HealthReport>;
  /** The API's public address (…/api/v1): PUBLIC_BASE_URL or the listen address, never the request's Host header. */
  publicBaseUrl: () => string;
  logError: ErrorLogger;
  orders?: OrderService;
  services?: ServiceRecords;
  /** Stop and refund. */
  refunds?: Refunds;
  media?: MediaLibrary;
  icecast?: { decider: MountDecider; credentials: { user: string; password: string } };
  rateLimits?: RateLimits;
  connections?: ConnectionCap;
  /** Reverse proxies whose X-Forwarded-For names the client (TRUSTED_PROXIES). */
  trustedProxies?: ReadonlySet<string>;
  metrics?: Metrics;
  log?: Logger;
  /** The signed chain head (none without an operator key). */
  auditHead?: HeadPublisher;
  /** The MCP server at POST /api/v1/mcp (tools over the same order machinery). */
  mcp?: MountedEndpoint;
  /** Wallet sign-in (SIWX) for services and self-service keys (POST/GET/DELETE /keys). */
  identity?: WalletIdentity;
  /** Webhook endpoints and the SSE feed of services' events. */
  events?: EventsApi;
  /** The host's stream capacity, reported by /availability. */
  capacity?: CapacityView;
  /** What services play (now-playing routes, the listen page). */
  nowPlaying?: NowPlaying;
  /** Listener sessions (GET /services/{id}/listeners). */
  listenerSessions?: ListenerSessions;
  /** The public listen pages. */
  listen?: ListenPages;
  /** The recordings' storage, in the usage document. */
  recordingStorage?: RecordingStorageUsage;
  /** Where and in what payments are made, for /.well-known/x402 (none while machine payment is not configured). */
  paymentTerms?: PaymentTerms;
  /** payTo's signatures of the site's origin, in /.well-known/x402 and OpenAPI x-discovery (src/http/ownership-proof.ts). */
  ownershipProofs?: Promise<readonly string[]>;
  /** HLS renditions of services (GET /hls/{service_id}/…), while streaming runs. */
  hls?: HlsManager;
}

/**
 * The server's request listener: the catalog's documents answered at once (fixedAnswers), everything else by the Koa
 * app; both through the same envelope parts.
 */
export function createRequestListener(deps: AppDeps): RequestListener {
  const parts = envelopeParts(deps);
  const answerFixed = fixedAnswers(parts, catalogDocumentAt(deps, API_PREFIX));
  const app = createApp(deps, parts).callback();
  return (req, res) => {
    if (!answerFixed(req, res)) void app(req, res);
  };
}

function envelopeParts(deps: AppDeps): EnvelopeParts {
  return {
    logError: deps.logError,
    addressOf: deps.trustedProxies?.size ? clientAddress(deps.trustedProxies) : undefined,
    connections: deps.connections,
    rateLimiter: rateLimiter(deps.rateLimits),
    record: deps.metrics && deps.log ? deps.metrics.requestRecorder(deps.log) : undefined,
    // A router matches every request against its routes: only Icecast's callbacks are sent through this one.
    internal: deps.icecast && {
      prefix: ICECAST_CALLBACK_PREFIX,
      routes: icecastCallbackRoutes(deps.icecast.decider, deps.icecast.credentials).routes() as Koa.Middleware,
    },
  };
}

function createApp(deps: AppDeps, envelopeParts: EnvelopeParts): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true;
  const router = new Router({ prefix: API_PREFIX });
  discoveryRoutes(router, deps);
  quoteRoutes(router, deps);
  orderRoutes(router, deps);
  serviceRoutes(router, { ...deps, callers: deps.identity?.callers });
  refundRequestRoutes(router, deps);
  if (deps.identity) keyRoutes(router, { ...deps, ...deps.identity });
  eventRoutes(router, deps);
  listenRoutes(router, deps);
  serviceProfileRoutes(router, { ...deps, callers: deps.identity?.callers });
  recordingRoutes(router, { ...deps, callers: deps.identity?.callers });
  recordingRetentionRoutes(router, { ...deps, callers: deps.identity?.callers });
  serviceStatsRoutes(router, { ...deps, callers: deps.identity?.callers });
  auditRoutes(router, deps);
  hlsRoutes(router, deps.hls);
  if (deps.mcp) router.post('/mcp', deps.mcp.handle);
  router.get('/openapi.json', async (ctx) => {
    ctx.type = 'application/json; charset=utf-8';
    const snapshot = deps.live.current;
    ctx.body = openApiDocument(snapshot, deps.version, await billingOptions(snapshot), await deps.ownershipProofs);
  });
  app.use(envelope(envelopeParts));
  app.use(router.routes());
  app.use(router.allowedMethods());
  app.use(wellKnownRoutes(deps).routes());
  app.use(siteIconRoutes().routes());
  return app;
}

/** Site-root discovery documents (outside /api/v1). */
function wellKnownRoutes(deps: AppDeps): Router {
  const router = new Router();
  const x402 = async (ctx: Koa.Context) => {
    const snapshot = deps.live.current;
    ctx.type = 'application/json; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=60');
    ctx.body = wellKnownX402(
      snapshot,
      await billingOptions(snapshot),
      deps.publicBaseUrl(),
      deps.paymentTerms,
      await deps.ownershipProofs,
    );
  };
  router.get('/.well-known/x402', x402);
  router.get('/.well-known/x402.json', x402);
  router.get('/openapi.json', async (ctx) => {
    const snapshot = deps.live.current;
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = siteOpenApiDocument(
      snapshot,
      deps.version,
      API_PREFIX,
      await billingOptions(snapshot),
      await deps.ownershipProofs,
    );
  });
  return router;
}
