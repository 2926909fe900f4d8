/** POST /mcp in /openapi.json: the MCP endpoint (its tools are described by tools/list, not here). */

const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const jsonRpcError = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/McpJsonRpcResponse' } } },
});

export const part = {
  tags: [
    {
      name: 'MCP',
      description:
        'The same operations as MCP tools (Model Context Protocol, Streamable HTTP transport), paid with x402 over MCP.',
    },
  ],
  paths: {
    '/mcp': {
      post: {
        tags: ['MCP'],
        operationId: 'mcp',
        summary:
          'MCP endpoint (Streamable HTTP, stateless): tools list_products, describe_product, quote, order, service_status, service_usage, service_events, upgrade_service, extend_service, set_playlist, stop_service.',
        description:
          'One JSON-RPC 2.0 message per POST, answered with one JSON response (no session, no server-sent stream: GET is not offered). ' +
          'Send "Accept: application/json, text/event-stream" and "Content-Type: application/json", as MCP clients do. ' +
          "tools/list gives each tool's input schema, generated from the catalog (the same JSON Schemas as the REST request bodies and Parameters_* here). " +
          'list_products and describe_product are public; the other tools need "Authorization: Bearer <AGENT_API_KEY>" on this request. ' +
          'Failures are tool results with isError: true and the REST error document as structuredContent. ' +
          'order, upgrade_service and extend_service are paid with x402 v2 over MCP (x402 specs/transports-v2/mcp.md): without payment the result has isError: true and the x402 PaymentRequired as structuredContent and as content[0].text; ' +
          'call again with the same arguments (same idempotency_key) and the PaymentPayload in params._meta["x402/payment"]; the result carries the settlement in _meta["x402/payment-response"]. ' +
          'The official x402 client refuses payments above $1 unless setSpendControls raises maxAmountPerPayment; many orders cost more.',
        security: [{}, { agentApiKey: [] }],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/McpJsonRpcRequest' } } },
        },
        responses: {
          200: {
            description:
              'The JSON-RPC response: a tool result (possibly isError) or a JSON-RPC error for a malformed MCP message.',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/McpJsonRpcResponse' } } },
          },
          202: { description: 'A notification or response from the client was accepted (no JSON body).' },
          400: jsonRpcError(
            'A JSON-RPC batch (MCP 2025-06-18 removed batches: one request per POST), a JSON value that is not a request object, a JSON object that is not a valid JSON-RPC message, or an unsupported MCP-Protocol-Version header: a JSON-RPC error (code -32600 for the first two, else from the MCP transport).',
          ),
          406: jsonRpcError(
            'The Accept header does not allow both application/json and text/event-stream: a JSON-RPC error (from the MCP transport).',
          ),
          413: error('Body too large.'),
          415: {
            description:
              'The body is not JSON (Content-Type not application/json nor *+json): the error document. A *+json Content-Type other than application/json: a JSON-RPC error from the MCP transport.',
            content: {
              'application/json': {
                schema: {
                  oneOf: [{ $ref: '#/components/schemas/Error' }, { $ref: '#/components/schemas/McpJsonRpcResponse' }],
                },
              },
            },
          },
          422: error('Body is not JSON, or holds a number that cannot be read exactly.'),
          429: error('Too many requests (rate_limited).'),
        },
      },
    },
  },
  schemas: {
    McpJsonRpcRequest: {
      type: 'object',
      required: ['jsonrpc', 'method'],
      properties: {
        jsonrpc: { const: '2.0' },
        id: { type: ['string', 'integer'] },
        method: { type: 'string', description: 'initialize, tools/list, tools/call, notifications/initialized, …' },
        params: {
          type: 'object',
          description:
            'For tools/call: name, arguments and optionally _meta["x402/payment"] (an x402 v2 PaymentPayload).',
        },
      },
    },
    McpJsonRpcResponse: {
      type: 'object',
      required: ['jsonrpc'],
      properties: {
        jsonrpc: { const: '2.0' },
        id: { type: ['string', 'integer', 'null'] },
        result: {
          type: 'object',
          description:
            'For tools/call: content, structuredContent, isError and _meta["x402/payment-response"] (the x402 settlement) after a paid call.',
        },
        error: {
          type: 'object',
          required: ['code', 'message'],
          properties: { code: { type: 'integer' }, message: { type: 'string' }, data: {} },
        },
      },
    },
  },
};
