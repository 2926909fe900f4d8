import {
  SUPPORTED_PROTOCOL_VERSIONS,
  Server,
  type CallToolResult,
  type Tool as ListedTool,
} from '@modelcontextprotocol/server';
import { ApiError, asApiError } from '../errors/index.js';
import { objectValidator } from '../schema/object-validator.js';
import type { Snapshot } from '../pricing/index.js';
import type { Caller } from './caller.js';
import type { PaymentTerms } from '../payments/index.js';
import { keyTools, type KeyTool, type KeyToolDeps } from './key-tools.js';
import { paidToolMeta } from './paid-tool-declaration.js';
import { argumentSchemas, publishedSchemas, type ToolName } from './tool-schemas.js';
import { toolError, toolResult } from './tool-results.js';
import { tools as serviceTools, type Tool } from './tools.js';
import { paymentOfCall } from './x402-binding.js';

/** The MCP revision without sessions, served beside the 2025 eras the SDK negotiates with initialize. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

type AnyTool = (Tool | KeyTool) & { paid?: boolean };
const tools: AnyTool[] = [...serviceTools, ...keyTools];
const toolsByName = new Map(tools.map((t) => [t.name, t]));

const checkArguments = new Map(
  Object.entries(argumentSchemas).map(([name, schema]) => [
    name,
    objectValidator<Record<string, unknown>>(schema, `input of the ${name} tool`, 'tools/list gives its inputSchema'),
  ]),
);

const listed = new WeakMap<Snapshot, { terms: PaymentTerms | undefined; tools: ListedTool[] }>();

/** tools/list: each tool with the input schema generated from the catalog being served; paid tools say so in _meta. */
export function listTools(snapshot: Snapshot, terms?: PaymentTerms): ListedTool[] {
  let result = listed.get(snapshot);
  if (!result || result.terms !== terms) {
    const schemas = publishedSchemas(snapshot);
    result = {
      terms,
      tools: tools.map((t) => ({
        name: t.name,
        title: t.title,
        description: t.description,
        inputSchema: schemas[t.name] as ListedTool['inputSchema'],
        annotations: { title: t.title, readOnlyHint: t.readOnly, openWorldHint: false },
        ...(t.paid && { _meta: paidToolMeta(t.name, terms) }),
      })),
    };
    listed.set(snapshot, result);
  }
  return result.tools;
}

/** What a tool call leaves on its HTTP request for the request log: the request id, and the order id of a paid call. */
export interface RequestState {
  requestId: string;
  orderId?: string;
}

/**
 * One HTTP request to the endpoint: its caller, its log state, and `httpPaymentHeader`, the name of an x402 payment
 * header the request carries (a payment misplaced: over MCP it belongs in _meta).
 */
export interface Exchange {
  caller: Caller;
  state: RequestState;
  httpPaymentHeader?: string;
}

/**
 * tools/list is the same for every caller until the catalog changes: a modern client may keep it a minute, in a
 * shared cache too. server/discover only changes with a deployment.
 */
const CACHE_HINTS = {
  'tools/list': { ttlMs: 60_000, cacheScope: 'public' },
  'server/discover': { ttlMs: 300_000, cacheScope: 'public' },
} as const;

/** One MCP server for one HTTP request (stateless), in whichever era the request speaks. */
export function mcpServer(deps: KeyToolDeps, exchange: Exchange, version: string): Server {
  const { caller, state, httpPaymentHeader } = exchange;
  const { requestId } = state;
  const server = new Server(
    { name: 'agent-audio-api', version },
    {
      capabilities: { tools: { listChanged: false } },
      supportedProtocolVersions: [MODERN_PROTOCOL_VERSION, ...SUPPORTED_PROTOCOL_VERSIONS],
      cacheHints: CACHE_HINTS,
      instructions:
        'Buy live audio streams and temporary AutoDJ and pay with x402 v2 (USDC on Base). Flow: ' +
        'list_products → quote → order (paid) → service_status / service_usage. A wallet without an API key ' +
        'signs in once with create_api_key and uses the key it returns for every other call. Every failure ' +
        'is a tool result with isError and the REST error document {ok:false, error:{code, message, ' +
        'retryable, request_id}}; the message says what to do next.',
    },
  );
  server.setRequestHandler('tools/list', () => ({ tools: listTools(deps.live.current, deps.paymentTerms) }));
  server.setRequestHandler('tools/call', async (request): Promise<CallToolResult> => {
    const { name, arguments: given, _meta: meta } = request.params;
    try {
      const tool = toolsByName.get(name as ToolName);
      if (!tool) {
        throw new ApiError(
          404,
          'tool_not_found',
          `There is no tool ${JSON.stringify(name).slice(0, 100)}. tools/list names every tool: ` +
            `${tools.map((t) => t.name).join(', ')}.`,
        );
      }
      const payment = tool.paid ? paymentOfCall(tool.name, meta, httpPaymentHeader) : undefined;
      const args = checkArguments.get(tool.name)!(structuredClone(given ?? {}));
      const outcome = await tool.run({ args, caller, payment }, deps);
      if (outcome.paymentResponse) state.orderId = (outcome.body.order as { id: string }).id;
      return toolResult(outcome.body, outcome.paymentResponse) as CallToolResult;
    } catch (e) {
      const error = asApiError(e);
      if (!(e instanceof ApiError) && error.status >= 500)
        deps.logError({ err: e, request_id: requestId, tool: name }, 'MCP tool call failed');
      return toolError(error, requestId, name) as CallToolResult;
    }
  });
  return server;
}
