import type Router from '@koa/router';
import type { Context } from 'koa';
import { formatDiagnostic } from '../catalog/index.js';
import { ApiError } from '../errors/index.js';
import { billingOptions, type LiveSnapshot } from '../pricing/index.js';
import { discoveryDocuments, type CheckoutStatus } from './discovery-documents.js';
import { productIdPattern } from './schemas.js';

export type HealthReport = Record<string, { ok: boolean } & Record<string, unknown>>;

export interface DiscoveryDeps {
  live: LiveSnapshot;
  checkout: CheckoutStatus;
  version: string;
  checkHealth: () => Promise<HealthReport>;
  auditHead?: { signer: { keyId: string; publicKeyPem: string } };
}

const productId = new RegExp(productIdPattern);

export function discoveryRoutes(router: Router, deps: DiscoveryDeps): void {
  const documents = async () => {
    const snapshot = deps.live.current;
    return discoveryDocuments(snapshot, deps.checkout, await billingOptions(snapshot));
  };
  const send = (ctx: Context, body: Buffer) => {
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = body;
  };

  router.get('/health', async (ctx) => {
    ctx.body = publicHealth(deps, await deps.checkHealth());
  });
  router.get('/products', async (ctx) => send(ctx, (await documents()).products));
  router.get('/products/:product_id', async (ctx) => {
    const id = ctx.params.product_id;
    const body = productId.test(id) ? (await documents()).product.get(id) : undefined;
    if (!body) throw new ApiError(404, 'product_not_found', `There is no product ${JSON.stringify(id).slice(0, 100)}. GET /api/v1/products lists every product id.`);
    send(ctx, body);
  });
  router.get('/pricing', async (ctx) => send(ctx, (await documents()).pricing));
  router.get('/availability', async (ctx) => send(ctx, (await documents()).availability));
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
      ? { signed_head: '/api/v1/audit/head', key_id: deps.auditHead.signer.keyId, public_key: deps.auditHead.signer.publicKeyPem }
      : { signed_head: null, reason: 'no operator signing key is configured' },
    links: { openapi: '/api/v1/openapi.json', products: '/api/v1/products', pricing: '/api/v1/pricing', availability: '/api/v1/availability', x402_discovery: '/.well-known/x402' },
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
