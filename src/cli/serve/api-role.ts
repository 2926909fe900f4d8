import type { HeadPublisher } from '../../audit/index.js';
import { walletIdentity } from '../../identity/index.js';
import {
  createRequestListener,
  type CheckoutStatus,
  type ConnectionCap,
  type MountedEndpoint,
} from '../../http/index.js';
import type { McpEndpoint } from '../../mcp/index.js';
import type { OrderRecovery } from '../../orders/index.js';
import { QuoteService } from '../../quotes/index.js';
import { includedStorageOf, recordingStorageUsage } from '../../recordings/index.js';
import type { RefundWorker } from '../../refunds/index.js';
import type { IcecastDecider } from '../../services/index.js';
import type { Events } from '../events.js';
import { servedOwnershipProofs } from '../ownership-proofs.js';
import { serviceVersion } from '../version.js';
import type { Foundation } from './foundation.js';
import type { healthCheck } from './health.js';
import type { refunding } from './refunding.js';
import { poolCapacity, type sales } from './sales.js';
import type { StreamingParts } from './streaming-parts.js';

/** What the API is built from beside the foundation: the application's parts, started by startApplication. */
export interface ApiParts {
  parts: StreamingParts;
  sold: ReturnType<typeof sales>;
  refunds: ReturnType<typeof refunding>;
  checkout: CheckoutStatus;
  auditHead?: HeadPublisher;
  checkHealth: ReturnType<typeof healthCheck>;
  decider?: IcecastDecider;
  eventing: Events;
  connections: ConnectionCap;
}

/** Everything agents reach over HTTP and MCP, handed to the listening server. */
export function serveApi(base: Foundation, api: ApiParts): void {
  const { config, log, http, stream } = base;
  const { parts, sold, decider, connections } = api;
  const shared = sharedParts(base, api);
  const identity = walletIdentity(
    base.db,
    base.keys,
    {
      publicBaseUrl: () => http.publicBaseUrl,
      network: base.pay.checkout.network,
      challengeSeconds: config.siwxChallengeSeconds,
      allowedFactories: config.eip6492Factories,
      ...(base.chainChecks && { chain: base.chainChecks }),
    },
    config.signup,
  );
  const mcp = loadedOnFirstRequest({
    ...shared,
    callers: identity.callers,
    selfServiceKeys: identity.selfServiceKeys,
    listenHost: config.host,
    allowedOrigins: config.mcpAllowedOrigins,
  });
  http.serve(
    createRequestListener({
      ...shared,
      auditHead: api.auditHead,
      checkHealth: api.checkHealth,
      ...(sold.placement && { capacity: { read: () => poolCapacity(sold.placement) } }),
      listenerSessions: parts.listenerSessions,
      listen: parts.listen,
      hls: parts.hls,
      ...(decider && { icecast: { decider, credentials: stream.callbackCredentials } }),
      log,
      connections,
      trustedProxies: config.trustedProxies,
      mcp,
      identity,
      rateLimits: { perIp: config.http.ratePerIp, perKey: config.http.ratePerKey },
      ownershipProofs: servedOwnershipProofs({
        configured: config.payments.ownershipProofs,
        payTo: sold.paymentTerms?.payTo,
        publicBaseUrl: http.publicBaseUrl,
        production: config.production,
        log,
      }),
    }),
  );
}

/** What REST and MCP both reach. */
function sharedParts({ log, db, live, audit, keys, metrics, http }: Foundation, api: ApiParts) {
  const { parts, sold } = api;
  return {
    live,
    keys,
    events: api.eventing.api,
    publicBaseUrl: () => http.publicBaseUrl,
    quotes: new QuoteService(db, live, audit),
    checkout: api.checkout,
    orders: sold.orders,
    services: parts.services,
    refunds: api.refunds.refunds,
    media: parts.api.media,
    metrics,
    nowPlaying: parts.api.nowPlaying,
    ...(parts.listen && {
      recordingStorage: recordingStorageUsage(
        parts.listen.recordings,
        includedStorageOf(() => live.current.catalog.products),
      ),
    }),
    version: serviceVersion,
    logError: (fields: Record<string, unknown>, message: string) => log.error(fields, message),
    ...(sold.paymentTerms && { paymentTerms: sold.paymentTerms }),
  };
}

/** The API's workers: they recover unfinished orders and send refunds, for every host. */
export function startApiWorkers(
  { shutdown }: Foundation,
  { recovery, refundWorker }: { recovery?: OrderRecovery; refundWorker: RefundWorker },
): void {
  if (recovery) {
    recovery.start();
    shutdown.push(() => recovery.stop());
  }
  refundWorker.start();
  shutdown.push(() => refundWorker.stop());
}

/**
 * The MCP endpoint, with its SDK loaded by the first MCP request rather than by every start, where it was a twentieth
 * of a start's CPU. A load that failed is tried again by the next request.
 */
function loadedOnFirstRequest(deps: ConstructorParameters<typeof McpEndpoint>[0]): MountedEndpoint {
  let endpoint: Promise<McpEndpoint> | undefined;
  return {
    handle: async (ctx) => {
      endpoint ??= import('../../mcp/index.js')
        .then((mcp) => new mcp.McpEndpoint(deps))
        .catch((error: unknown) => {
          endpoint = undefined;
          throw error;
        });
      return (await endpoint).handle(ctx);
    },
  };
}
