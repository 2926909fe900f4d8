import { assetDomain } from '../chain/networks.js';
import type { PaymentTerms } from '../payments/index.js';
import { KeyedSnapshotCache, type BillingOption, type Snapshot } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import { SERVICE_NAME, SERVICE_TAGS } from '../operations/index.js';
import { paidOperations } from './paid-operations.js';

const cache = new KeyedSnapshotCache<Buffer>();

/**
 * GET /.well-known/x402: the x402 discovery manifest (a draft of x402-foundation/x402, specs/extensions/
 * well-known-discovery.md): the paid operations, how to call them, their networks, asset and price range. Advisory:
 * prices depend on the order, and the live 402 is authoritative, so `accepts` carries no amount and `priceRange` says
 * what any order may cost. `ownershipProofs`: payTo's signatures of the site's origin (src/http/ownership-proof.ts).
 */
export function wellKnownX402(
  snapshot: Snapshot,
  billing: Map<string, BillingOption[]>,
  apiBaseUrl: string,
  terms: PaymentTerms | undefined,
  ownershipProofs: readonly string[] = [],
): Buffer {
  const key = `${apiBaseUrl}\n${terms?.payTo ?? ''}\n${ownershipProofs.join(',')}`;
  return cache.get(snapshot, key, () =>
    Buffer.from(JSON.stringify(build(snapshot, billing, apiBaseUrl, terms, ownershipProofs))),
  );
}

function build(
  snapshot: Snapshot,
  billing: Map<string, BillingOption[]>,
  apiBaseUrl: string,
  terms: PaymentTerms | undefined,
  ownershipProofs: readonly string[],
) {
  const { minimum, maximum } = snapshot.catalog.settings.order_limits;
  const atomic = (amount: string) => new Decimal(amount).times(1_000_000).toFixed(0);
  const operations = paidOperations(snapshot, billing);
  return {
    x402Version: 2,
    lastUpdated: Math.floor(Date.now() / 1000),
    status: 'draft: follows x402 specs/extensions/well-known-discovery.md; the live 402 answer is authoritative',
    openapi: `${apiBaseUrl}/openapi.json`,
    // The origin-level discovery shape that agentcash and other crawlers read: the paid resources' URLs (every one is
    // a POST, the method such readers assume when none is given), and what an agent must know to call them.
    version: 1,
    resources: operations.map((operation) => `${apiBaseUrl}${operation.routeTemplate}`),
    ownershipProofs,
    instructions:
      `Agent Audio API: buy live audio streams and AutoDJ, paid with x402 v2 (USDC on ${terms?.network ?? 'eip155:8453'}). ` +
      `Every call needs Authorization: Bearer <agent API key> (POST ${apiBaseUrl}/keys with wallet sign-in, or from the operator). ` +
      `Price a configuration with POST ${apiBaseUrl}/quotes, then POST ${apiBaseUrl}/orders with an Idempotency-Key: the 402 says what to pay. ` +
      `OpenAPI: ${apiBaseUrl}/openapi.json (also /openapi.json at the site root).`,
    items: operations.map((operation) => ({
      resource: {
        url: `${apiBaseUrl}${operation.routeTemplate}`,
        description: operation.description,
        mimeType: 'application/json',
        serviceName: SERVICE_NAME,
        tags: SERVICE_TAGS,
      },
      type: 'http',
      accepts: terms
        ? [
            {
              scheme: 'exact',
              network: terms.network,
              asset: terms.asset,
              payTo: terms.payTo,
              maxTimeoutSeconds: terms.maxTimeoutSeconds,
              extra: assetDomain(terms.network),
            },
          ]
        : [],
      priceRange: {
        currency: 'USDC',
        decimals: 6,
        minimum,
        maximum,
        minimum_atomic: atomic(minimum),
        maximum_atomic: atomic(maximum),
        mode: 'dynamic',
        quote: `${apiBaseUrl}/quotes`,
      },
      input: {
        method: operation.method,
        routeTemplate: `/api/v1${operation.routeTemplate}`,
        bodyType: 'json',
        body: operation.inputSchema,
        ...(operation.pathParams && { pathParams: operation.pathParams }),
        headers: { Authorization: 'Bearer <agent API key>', 'Idempotency-Key': 'a new unique value per purchase' },
      },
      output: { mimeType: 'application/json', schema: operation.outputSchema, example: operation.outputExample },
      requires: ['payment-identifier'],
    })),
  };
}
