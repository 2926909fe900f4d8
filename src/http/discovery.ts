import type Router from '@koa/router';
import type { Context } from 'koa';
import { formatDiagnostic } from '../catalog/index.js';
import { ApiError } from '../errors/index.js';
import { billingOptions, type Snapshot } from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { availabilityAnswer, type CapacityView } from './availability.js';
import { discoveryDocuments, type CheckoutStatus, type DiscoveryDocuments } from '../operations/discovery-documents.js';
import type { FixedAnswer } from './envelope.js';
import { productIdPattern } from './schemas.js';

export type HealthReport = Record<string, { ok: boolean } & Record<string, unknown>>;

export interface DiscoveryDeps {
  live: LiveSnapshot;
  checkout: CheckoutStatus;
  version: string;
  checkHealth: () => Promise<HealthReport>;
  auditHead?: { signer: { keyId: string; publicKeyPem: string } };
  /** The host's stream capacity, which /availability reports against (none: streaming is not sold here). */
  capacity?: CapacityView;
}

const productId = new RegExp(productIdPattern);

/** The catalog's documents at fixed paths: they change only with the snapshot, so each is built once per snapshot. */
const CATALOG_DOCUMENTS: Record<string, (documents: DiscoveryDocuments) => Buffer> = {
  '/products': (documents) => documents.products,
  '/pricing': (documents) => documents.pricing,
};

function catalogDocuments(deps: DiscoveryDeps) {
  return async (snapshot = deps.live.current) =>
    discoveryDocuments(snapshot, deps.checkout, await billingOptions(snapshot));
}

function send(ctx: Context, body: Buffer): void {
  ctx.set('Content-Type', 'application/json; charset=utf-8');
  ctx.body = body;
}

export function discoveryRoutes(router: Router, deps: DiscoveryDeps): void {
  const documents = catalogDocuments(deps);
  router.get('/health', async (ctx) => {
    ctx.body = publicHealth(deps, await deps.checkHealth());
  });
  for (const [path, pick] of Object.entries(CATALOG_DOCUMENTS))
    router.get(path, async (ctx) => send(ctx, pick(await documents())));
  // Not a fixed document: it tells what the host has room for now.
  const availability = availabilityAnswer(
    deps.capacity,
    () => deps.live.current.catalog.settings.capacity_reserve,
    () => deps.checkout,
  );
  router.get('/availability', async (ctx) => availability(ctx, (await documents()).availability));
  router.get('/products/:product_id', async (ctx) => {
    const id = ctx.params.product_id;
    const body = productId.test(id) ? (await documents()).product.get(id) : undefined;
    if (!body)
      throw new ApiError(
        404,
        'product_not_found',
        `There is no product ${JSON.stringify(id).slice(0, 100)}. GET /api/v1/products lists every product id.`,
      );
    send(ctx, body);
  });
}

/**
 * The catalog's documents by exact URL (no query), for answers that skip the router: undefined for any other URL, and
 * until the current snapshot's documents are built (the router's handler builds them).
 */
export function catalogDocumentAt(deps: DiscoveryDeps, prefix: string): (url: string) => FixedAnswer | undefined {
  const documents = catalogDocuments(deps);
  const built = new WeakMap<Snapshot, DiscoveryDocuments>();
  const byUrl = new Map(
    Object.entries(CATALOG_DOCUMENTS).map(([path, pick]) => [prefix + path, { route: prefix + path, pick }]),
  );
  return (url) => {
    const document = byUrl.get(url);
    if (!document) return undefined;
    const snapshot = deps.live.current;
    const found = built.get(snapshot);
    if (!found) {
      void documents(snapshot).then(
        (ready) => built.set(snapshot, ready),
        () => {},
      ); // the router answers meanwhile
      return undefined;
    }
    return { route: document.route, body: document.pick(found) };
  };
}

/**
 * What an agent needs to know: whether the service and its payment path work, which catalog it prices from, where to
 * go next. Addresses, latencies and catalog file errors are for the operator (healthDetails, on the metrics listener).
 */
function publicHealth(deps: DiscoveryDeps, checks: HealthReport) {
  const snapshot = deps.live.current;
  return {
    ok: true,
    service: snapshot.catalog.settings.service,
    version: deps.version,
    status: Object.values(checks).every((c) => c.ok) ? 'ok' : 'degraded',
    provider: snapshot.catalog.settings.provider,
    machine_payment: deps.checkout,
    catalog: {
      catalog_version: snapshot.catalog.settings.catalog_version,
      content_hash: snapshot.hash,
      reload_errors: deps.live.lastDiagnostics.length,
    },
    checks: Object.fromEntries(Object.entries(checks).map(([name, check]) => [name, { ok: check.ok }])),
    audit: deps.auditHead
      ? {
          signed_head: '/api/v1/audit/head',
          key_id: deps.auditHead.signer.keyId,
          public_key: deps.auditHead.signer.publicKeyPem,
        }
      : { signed_head: null, reason: 'no operator signing key is configured' },
    links: {
      openapi: '/api/v1/openapi.json',
      products: '/api/v1/products',
      pricing: '/api/v1/pricing',
      availability: '/api/v1/availability',
      x402_discovery: '/.well-known/x402',
    },
  };
}

/** The operator's view (GET /health/details on the metrics listener): the public document plus every check's details. */
export async function healthDetails(deps: DiscoveryDeps): Promise<Record<string, unknown>> {
  const checks = await deps.checkHealth();
  const health = publicHealth(deps, checks);
  return {
    ...health,
    catalog: {
      ...health.catalog,
      disk_content_hash: deps.live.diskHash,
      errors: deps.live.lastDiagnostics.slice(0, 10).map(formatDiagnostic),
      last_reload_error: deps.live.lastError ?? null,
    },
    checks,
  };
}
