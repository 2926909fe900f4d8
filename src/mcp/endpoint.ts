import {
  createMcpHandler,
  isLegacyRequest,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type McpHttpHandler,
  type McpRequestContext,
} from '@modelcontextprotocol/server';
import type { Context } from 'koa';
import { readJson } from '../transport/index.js';
import { identify } from './caller.js';
import { RequestOrigins, type OriginSettings } from './request-origin.js';
import { mcpServer, type Exchange } from './server.js';
import type { KeyToolDeps } from './key-tools.js';
import { HTTP_PAYMENT_HEADERS } from './x402-binding.js';

type EndpointDeps = KeyToolDeps & { version: string } & Partial<Pick<OriginSettings, 'listenHost' | 'allowedOrigins'>>;

/**
 * POST /api/v1/mcp, in both protocol eras of @modelcontextprotocol/server (SDK 2.x), statelessly: each request gets
 * its own server, built for that request's caller, and one JSON response, so any instance answers any request (the
 * tools keep their state in PostgreSQL, as the REST routes do). A request with the 2026-07-28 `_meta` envelope goes to
 * the SDK's modern handler (server/discover, per-request protocol version and capabilities, cache fields, resultType);
 * any other, the 2025 eras' initialize and calls, to the SDK's Streamable HTTP transport in JSON mode, as before the
 * modern era (the SDK's own legacy fallback would answer in SSE). The answer goes out through Koa, with its request
 * id, metrics and error documents.
 */
export class McpEndpoint {
  private readonly origins: RequestOrigins;
  private readonly modern: McpHttpHandler;

  constructor(private readonly deps: EndpointDeps) {
    const { publicBaseUrl, listenHost, allowedOrigins } = deps;
    this.origins = new RequestOrigins({ publicBaseUrl, listenHost, allowedOrigins });
    // The default response mode answers JSON unless a tool sends a notification before its result (ours send none);
    // 'json' would also drop such notifications, and the SDK warns about that on every start.
    this.modern = createMcpHandler((context) => this.serverOf(context), { legacy: 'reject' });
  }

  readonly handle = async (ctx: Context): Promise<void> => {
    const refusal = this.origins.refusal(ctx.get('Host') || undefined, ctx.get('Origin') || undefined);
    if (refusal) {
      ctx.status = 403;
      ctx.body = { jsonrpc: '2.0', id: null, error: { code: -32000, message: refusal } };
      return;
    }
    const body = await readJson(ctx);
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      // JSON-RPC's own answer to a request it cannot take; MCP 2025-06-18 removed batches.
      ctx.status = 400;
      ctx.body = {
        jsonrpc: '2.0',
        id: null,
        error: {
          code: -32600,
          message: Array.isArray(body)
            ? 'JSON-RPC batches are not accepted (MCP 2025-06-18 removed them): send each request in a POST of its own.'
            : 'The body must be one JSON-RPC request object, e.g. {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}.',
        },
      };
      return;
    }
    const exchange = this.exchangeOf(ctx);
    const request = webRequest(ctx);
    const response = (await isLegacyRequest(request, body))
      ? await this.legacy(request, body, exchange)
      : await this.modern.fetch(request, { parsedBody: body, authInfo: carrying(exchange) });
    ctx.status = response.status;
    response.headers.forEach((value, name) => {
      ctx.set(name, value);
    });
    const answer = Buffer.from(await response.arrayBuffer());
    if (answer.length) ctx.body = answer;
  };

  /** Who calls, and what the request carries besides its body. */
  private exchangeOf(ctx: Context): Exchange {
    const { callers, publicBaseUrl } = this.deps;
    return {
      caller: identify(ctx, this.deps.keys, callers && { callers, publicBaseUrl }),
      state: ctx.state,
      httpPaymentHeader: HTTP_PAYMENT_HEADERS.find((name) => ctx.get(name)),
    };
  }

  /** A 2025-era request: its own server and Streamable HTTP transport, answered with one JSON response. */
  private async legacy(request: Request, body: unknown, exchange: Exchange): Promise<Response> {
    const server = mcpServer(this.deps, exchange, this.deps.version);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    try {
      await server.connect(transport);
      return await transport.handleRequest(request, { parsedBody: body });
    } finally {
      await server.close();
    }
  }

  /** The modern handler's server factory: the request's exchange travels in the pass-through authInfo. */
  private serverOf(context: McpRequestContext) {
    return mcpServer(this.deps, context.authInfo!.extra!.exchange as Exchange, this.deps.version);
  }
}

/** The exchange as the SDK's authInfo, which it hands to the server factory untouched (it verifies no token itself). */
function carrying(exchange: Exchange): AuthInfo {
  return { token: '', clientId: 'agent-audio-api', scopes: [], extra: { exchange } };
}

/** The request's method and headers as the transports read them (the body is handed over already parsed). */
function webRequest(ctx: Context): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(ctx.req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return new Request(new URL(ctx.originalUrl, 'http://mcp.invalid'), { method: ctx.method, headers });
}
