import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Context } from 'koa';
import { readJson } from '../http/index.js';
import { identify } from './caller.js';
import { RequestOrigins, type OriginSettings } from './request-origin.js';
import { mcpServer } from './server.js';
import type { McpDeps } from './tools.js';
import { HTTP_PAYMENT_HEADERS } from './x402-binding.js';

type EndpointDeps = McpDeps & { version: string } & Partial<Pick<OriginSettings, 'listenHost' | 'allowedOrigins'>>;

/**
 * POST /api/v1/mcp: the MCP Streamable HTTP transport of @modelcontextprotocol/sdk, stateless. Each request gets its
 * own server and transport and is answered with one JSON response, so any instance can answer any request and nothing
 * is kept between requests (the tools keep their state in PostgreSQL, as the REST routes do). The SDK's web-standard
 * transport is used (the Node one wraps it) so that the answer goes out through Koa, with its request id, metrics and
 * error documents.
 */
export class McpEndpoint {
  private readonly origins: RequestOrigins;

  constructor(private readonly deps: EndpointDeps) {
    const { publicBaseUrl, listenHost, allowedOrigins } = deps;
    this.origins = new RequestOrigins({ publicBaseUrl, listenHost, allowedOrigins });
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
    const { callers, publicBaseUrl } = this.deps;
    const caller = identify(ctx, this.deps.keys, callers && { callers, publicBaseUrl });
    const paymentHeader = HTTP_PAYMENT_HEADERS.find((name) => ctx.get(name));
    const server = mcpServer(this.deps, caller, ctx.state, this.deps.version, paymentHeader);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    try {
      await server.connect(transport);
      const response = await transport.handleRequest(webRequest(ctx), { parsedBody: body });
      ctx.status = response.status;
      response.headers.forEach((value, name) => {
        ctx.set(name, value);
      });
      const answer = Buffer.from(await response.arrayBuffer());
      if (answer.length) ctx.body = answer;
    } finally {
      await server.close();
    }
  };
}

/** The request's method and headers as the transport reads them (the body is handed over already parsed). */
function webRequest(ctx: Context): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(ctx.req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return new Request(new URL(ctx.originalUrl, 'http://mcp.invalid'), { method: ctx.method, headers });
}
