import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { ApiError } from '../errors/index.js';
import { errorBody } from '../http/index.js';
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
 * A failed call as a tool error, never a protocol error: the REST error document. When the REST answer would be a
 * 402 (payment required, invalid, refused or not taken), the x402 MCP transport's binding instead: the PaymentRequired
 * object as structuredContent and as the first text, then the error document and how to pay over MCP.
 */
export function toolError(error: ApiError, requestId: string): CallToolResult {
  const document = errorBody(error, requestId);
  const paymentRequired = paymentRequiredOf(error);
  if (paymentRequired) {
    return {
      isError: true,
      structuredContent: paymentRequired,
      content: [
        { type: 'text', text: JSON.stringify(paymentRequired) },
        { type: 'text', text: JSON.stringify(document) },
        { type: 'text', text: 'Over MCP: sign an x402 PaymentPayload for one of "accepts" and call this tool again with the same arguments (the same idempotency_key), putting the PaymentPayload object in params._meta["x402/payment"]. The settlement comes back in _meta["x402/payment-response"] of the result.' },
      ],
    };
  }
  return { isError: true, structuredContent: document, content: [{ type: 'text', text: JSON.stringify(document) }] };
}
