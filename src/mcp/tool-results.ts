import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { errorBody, type ApiError } from '../errors/index.js';
import { mcpWording } from './tool-wording.js';
import { PAYMENT_RESPONSE_META_KEY, paymentRequiredOf, settlementOf } from './x402-binding.js';

/** A tool's answer: the same document as the REST response, as structuredContent and as JSON text. */
export function toolResult(body: Record<string, unknown>, paymentResponseHeader?: string): CallToolResult {
  return {
    structuredContent: body,
    content: [{ type: 'text', text: JSON.stringify(body) }],
    ...(paymentResponseHeader && { _meta: { [PAYMENT_RESPONSE_META_KEY]: settlementOf(paymentResponseHeader) } }),
  };
}

/**
 * A failed call as a tool error, never a protocol error: the REST error document, its message in MCP terms. When the
 * REST answer would be a 402 (payment required, invalid, refused or not taken), the x402 MCP transport's binding
 * instead: the PaymentRequired object (its `error` worded alike) as structuredContent and as the first text, then the
 * error document, whose message says how to pay over MCP.
 */
export function toolError(error: ApiError, requestId: string, tool: string): CallToolResult {
  const document = errorBody(error, requestId);
  document.error.message = mcpWording(error.message, tool);
  const paymentRequired = paymentRequiredOf(error);
  if (paymentRequired) {
    if (paymentRequired.error) paymentRequired.error = mcpWording(paymentRequired.error, tool);
    return {
      isError: true,
      structuredContent: paymentRequired,
      content: [
        { type: 'text', text: JSON.stringify(paymentRequired) },
        { type: 'text', text: JSON.stringify(document) },
      ],
    };
  }
  return { isError: true, structuredContent: document, content: [{ type: 'text', text: JSON.stringify(document) }] };
}
