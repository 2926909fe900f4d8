import { autoDjOffer } from '../catalog/index.js';
import type { BillingOption, Snapshot } from '../pricing/index.js';
import { KeyedSnapshotCache } from '../pricing/index.js';
import { openApiParts } from './openapi-parts/index.js';
import { CLIENT_CAP_NOTE } from './openapi-parts/common.js';
import { coreSchemas } from './openapi-parts/core-schemas.js';
import { discoveryPaths } from './openapi-parts/discovery.js';
import { orderPaths, paymentInfoOf } from './openapi-parts/orders.js';
import { servicePaths } from './openapi-parts/services.js';
import { freeFormObjectsOpen } from './openapi-typed.js';

const cache = new KeyedSnapshotCache<Buffer>();

/**
 * OpenAPI 3.1, generated from the schemas the server validates with and the catalog being served; with payTo's
 * ownership proofs in `x-discovery`, where x402scan and agentcash look for them first.
 */
export function openApiDocument(
  snapshot: Snapshot,
  version: string,
  billing?: Map<string, BillingOption[]>,
  ownershipProofs: readonly string[] = [],
): Buffer {
  return cache.get(snapshot, ownershipProofs.join(','), () =>
    Buffer.from(JSON.stringify(buildOpenApiDocument(snapshot, version, billing, ownershipProofs))),
  );
}

/** The document as an object (for the offline lint: npm run lint:openapi). */
export function buildOpenApiDocument(
  snapshot: Snapshot,
  version: string,
  billing?: Map<string, BillingOption[]>,
  ownershipProofs: readonly string[] = [],
): Record<string, unknown> {
  const document = freeFormObjectsOpen(build(snapshot, version, billing));
  return ownershipProofs.length ? { ...document, 'x-discovery': { ownershipProofs } } : document;
}

const info = (version: string) => ({
  title: 'Agent Audio Infrastructure API',
  version: '1.0.0',
  'x-service-version': version,
  license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
  description:
    'Buy live audio streams and temporary AutoDJ as a software agent and pay with x402 v2 (USDC on Base). ' +
    'Typical flow: GET /products → POST /quotes (exact USDC price) → POST /orders (answers 402 with PAYMENT-REQUIRED; pay and send the same request again with PAYMENT-SIGNATURE and the same Idempotency-Key). ' +
    `${CLIENT_CAP_NOTE} ` +
    'x402 discovery: /.well-known/x402 (draft manifest) and the bazaar extension on every 402. ' +
    'Every error is {ok:false, error:{code, message, retryable, request_id}}; the message says what to do next. Browsers may call every operation (CORS; PAYMENT-REQUIRED, PAYMENT-RESPONSE and X-Request-Id are exposed).',
});

/** The core tags (Discovery, Orders, Services) and, after them, every part's (openapi-parts/). */
function build(snapshot: Snapshot, version: string, billing?: Map<string, BillingOption[]>) {
  const parts = openApiParts;
  const paymentInfo = paymentInfoOf(snapshot);
  return {
    openapi: '3.1.0',
    info: info(version),
    servers: [{ url: '/api/v1' }],
    // The default for an operation that states none: POST /orders (spec 5.4: no security requirement of its own).
    security: [{ agentApiKey: [] }],
    tags: [
      { name: 'Discovery', description: 'Catalog, prices, availability and quotes.' },
      { name: 'Orders', description: 'Orders secured by a bearer key and confirmed by x402 v2 payment.' },
      { name: 'Services', description: 'State, usage and life cycle of a provisioned service.' },
      ...parts.flatMap((p) => p.tags ?? []),
    ],
    components: {
      securitySchemes: {
        agentApiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'agent-api-key',
          description: 'Send "Authorization: Bearer <AGENT_API_KEY>".',
        },
        ...Object.assign({}, ...parts.map((p) => p.securitySchemes)),
      },
      schemas: { ...coreSchemas(snapshot, billing), ...Object.assign({}, ...parts.map((p) => p.schemas)) },
    },
    paths: {
      ...discoveryPaths,
      ...orderPaths(paymentInfo),
      ...servicePaths(paymentInfo, autoDjOffer(snapshot.catalog)),
      ...Object.assign({}, ...parts.map((p) => p.paths)),
    },
  };
}
