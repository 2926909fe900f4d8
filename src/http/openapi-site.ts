import { KeyedSnapshotCache, type BillingOption, type Snapshot } from '../pricing/index.js';
import { buildOpenApiDocument } from './openapi.js';

const cache = new KeyedSnapshotCache<Buffer>();

/**
 * GET /openapi.json at the site root: the document of /api/v1/openapi.json with every path written from the root
 * (/api/v1/orders). Discovery clients (agentcash discover and check) read it there and match request paths against its
 * paths as written, without the server's base path.
 */
export function siteOpenApiDocument(
  snapshot: Snapshot,
  version: string,
  prefix: string,
  billing?: Map<string, BillingOption[]>,
  ownershipProofs: readonly string[] = [],
): Buffer {
  return cache.get(snapshot, `${prefix}\n${ownershipProofs.join(',')}`, () =>
    Buffer.from(JSON.stringify(fromRoot(buildOpenApiDocument(snapshot, version, billing, ownershipProofs), prefix))),
  );
}

function fromRoot(document: Record<string, unknown>, prefix: string): Record<string, unknown> {
  const paths = Object.entries(document.paths as Record<string, Record<string, unknown>>).map(([path, item]) => {
    if (!item.servers) return [`${prefix}${path}`, item];
    const { servers: _, ...rest } = item; // already written from the root
    return [path, rest];
  });
  return { ...document, servers: [{ url: '/' }], paths: Object.fromEntries(paths) };
}
