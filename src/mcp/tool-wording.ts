/**
 * The REST API's error messages in the terms of an MCP tool call. The order machinery, the quotes, the services and
 * the sign-in speak HTTP (headers, routes, "this same request"); over MCP a model reads them as instructions, so each
 * is reworded here: the payment travels in params._meta["x402/payment"], the requirements are the result's
 * PaymentRequired, the idempotency key is the idempotency_key argument, REST routes are the tools that do the same.
 * Headers of the MCP connection's own HTTP requests (Authorization, SIGN-IN-WITH-X) stay named as headers.
 */
type Rewrite = [RegExp, (tool: string) => string];

const PAYMENT_META = 'params._meta["x402/payment"]';
const PAYMENT_REQUIRED = 'the PaymentRequired of this result (its structuredContent)';
const SAME_CALL = (tool: string) => `call the ${tool} tool again with the same arguments (the same idempotency_key)`;
const OWN_HEADER = "header of the MCP connection's HTTP requests";

const rewrites: Rewrite[] = [
  [
    /send this same request again, with the same Idempotency-Key, adding PAYMENT-SIGNATURE/g,
    (tool) => `${SAME_CALL(tool)}, adding the signed x402 PaymentPayload object in ${PAYMENT_META}`,
  ],
  [
    /PAYMENT-SIGNATURE is not a Base64-encoded x402 v2 payment payload/g,
    () => `The payment in ${PAYMENT_META} is not an x402 v2 PaymentPayload object`,
  ],
  [
    /the 402 answer carries a fresh challenge in its PAYMENT-REQUIRED header/g,
    () => 'the error result carries a fresh challenge in its PaymentRequired (structuredContent)',
  ],
  [/(?:the|this|its) PAYMENT-REQUIRED header(?: of this answer)?/g, () => PAYMENT_REQUIRED],
  [
    /retry (?:this|the) same request(?: with the same Idempotency-Key)?|retry with the same Idempotency-Key/gi,
    SAME_CALL,
  ],
  [/retry now/gi, (tool) => `call the ${tool} tool again now`],
  [/send the request again/g, (tool) => `call the ${tool} tool again`],
  [/Idempotency-Key/g, () => 'idempotency_key'],
  [/a different body/g, () => 'different arguments'],
  [/the original body/g, () => 'the original arguments'],
  [/, see Retry-After(?=\))| \((?:see )?Retry-After\)/g, () => ''],
  [/GET \/services\/\{service_id\}(?!\/)/g, () => 'the service_status tool'],
  [/POST \/quotes/g, () => 'the quote tool'],
  [/POST \/orders/g, () => 'the order tool'],
  [/GET (?:\/api\/v1)?\/products\/[\w{}-]+/g, () => 'the describe_product tool'],
  [/GET (?:\/api\/v1)?\/products/g, () => 'the list_products tool'],
  [/Upload them first with PUT/g, () => 'Upload them first over the REST API (uploads are not MCP tools) with PUT'],
  [
    /with DELETE \/keys\/\{key_id\} \(GET \/keys lists them\)/g,
    () => 'with the revoke_api_key tool, called with that key (the REST API lists and revokes keys too)',
  ],
  [/ \(GET \/keys lists them\)/g, () => ''],
  [/as "Authorization: Bearer <key>"/g, () => `as the "Authorization: Bearer <key>" ${OWN_HEADER}`],
  [/in the SIGN-IN-WITH-X header/g, () => `in the SIGN-IN-WITH-X ${OWN_HEADER}`],
  // The sign-in names the HTTP route it was asked for; over MCP that is the connection's own endpoint.
  [/ of this\s+same request \((?:GET|POST|PUT|DELETE) [^)]*\)/g, () => ''],
];

/** The message with each HTTP term in its MCP form; a rewrite that starts a sentence starts with a capital. */
export function mcpWording(message: string, tool: string): string {
  return rewrites.reduce(
    (text, [pattern, replacement]) =>
      text.replace(pattern, (match: string, ...rest: unknown[]) => {
        const replaced = replacement(tool);
        const at = rest.find((r) => typeof r === 'number') as number;
        const startsSentence = at === 0 || /\.\s$/.test(text.slice(0, at));
        return startsSentence ? replaced[0].toUpperCase() + replaced.slice(1) : replaced;
      }),
    message,
  );
}
