import { declareDiscoveryExtension } from '@x402/extensions/bazaar';
import { SERVICE_NAME, SERVICE_TAGS } from '../http/index.js';
import type { PlaceOrder } from '../orders/index.js';
import type { Snapshot } from '../pricing/index.js';
import { publishedSchemas, type ToolName } from './tool-schemas.js';

const cache = new WeakMap<Snapshot, Map<ToolName, NonNullable<PlaceOrder['discovery']>>>();

/** How a paid tool's PaymentRequired introduces it to x402 discovery (bazaar, MCP form): its name and input schema. */
export function toolDiscovery(snapshot: Snapshot, name: ToolName, description: string): NonNullable<PlaceOrder['discovery']> {
  let byTool = cache.get(snapshot);
  if (!byTool) cache.set(snapshot, byTool = new Map());
  let discovery = byTool.get(name);
  if (!discovery) {
    const extensions = declareDiscoveryExtension({ toolName: name, description, inputSchema: publishedSchemas(snapshot)[name], transport: 'streamable-http' });
    discovery = {
      // Bazaar's MCP declarations need no HTTP context; the MCP endpoint stands in for it.
      declaration: { key: `${snapshot.hash}\nmcp\n${name}`, method: 'POST', path: '/api/v1/mcp', routePattern: '/api/v1/mcp', extensions },
      serviceName: SERVICE_NAME,
      tags: SERVICE_TAGS,
    };
    byTool.set(name, discovery);
  }
  return discovery;
}
