import { MAX_CHALLENGE_SECONDS } from '../../identity/index.js';

const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const json = (description: string, schema: unknown) => ({ description, content: { 'application/json': { schema } } });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
// {}: a request without credentials is answered too, with the 402 sign-in challenge (a validating proxy such as
// Prism refuses it with its own 401 otherwise).
const walletOnly = [{ siwx: [] }, {}];
const keyOrWallet = [{ agentApiKey: [] }, { siwx: [] }, {}];

const challenge = {
  description:
    'Sign in: no credentials were sent. PAYMENT-REQUIRED carries an x402 v2 PaymentRequired with extensions["sign-in-with-x"] ' +
    '(the challenge for this method and path: domain, uri, nonce, issuedAt, expirationTime; supportedChains) and one accepts entry that only names the chain ' +
    '(scheme sign-in-with-x, amount 0, payTo the zero address: nothing to pay; a PAYMENT-SIGNATURE sent here is not used). Sign it with the wallet (EIP-4361 message, EIP-191) ' +
    'and send the same request again with the signed message in SIGN-IN-WITH-X. wrapFetchWithSIWx or createSIWxClientHook (@x402/extensions/sign-in-with-x) do this.',
  headers: {
    'PAYMENT-REQUIRED': {
      description: 'x402 v2 PaymentRequired (sign-in only), Base64-encoded JSON.',
      schema: { type: 'string' },
    },
  },
  content: { 'application/json': { schema: ref('PaymentRequired') } },
};
const signInRefused = error(
  'The SIGN-IN-WITH-X message was refused: siwx_invalid (unreadable or malformed, another domain or URI origin, another chain, a signature not by the named wallet, a nonce this service did not issue), ' +
    'siwx_wrong_resource (issued for another method or path: a challenge proves one request to the route it was issued for), ' +
    'siwx_expired, or siwx_nonce_used (every challenge is accepted once). Ask this route again without SIGN-IN-WITH-X for a fresh challenge. With an Authorization header: invalid_api_key.',
);
const tooMany = error(
  'Too many requests from this address or key (rate_limited), too many keys for this wallet or address in the last hour (signup_rate_limited), ' +
    'or too many on-chain smart-wallet signature checks (chain_checks_busy): wait Retry-After seconds.',
);
const apiKeyInfo = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'name', 'created_at', 'revoked_at'],
  properties: {
    id: { type: 'string', pattern: '^[0-9a-f]{16}$' },
    name: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' },
    revoked_at: { type: ['string', 'null'], format: 'date-time' },
  },
};
const keyId = { name: 'key_id', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9a-f]{16}$' } };

/** OpenAPI for wallet sign-in (SIWX) and self-service keys (merged into /openapi.json by src/http/openapi.ts). */
export const part: {
  tags?: { name: string; description: string }[];
  paths: Record<string, unknown>;
  schemas: Record<string, unknown>;
  /** To merge into components.securitySchemes. */
  securitySchemes: Record<string, unknown>;
} = {
  tags: [
    {
      name: 'Keys',
      description:
        'Self-service agent API keys: a wallet signs in (x402 sign-in-with-x) and gets keys bound to it, lists and revokes them. ' +
        'Limited per wallet and per client address; an operator may turn it off (403 agent_signup_disabled) and issue keys instead.',
    },
  ],
  securitySchemes: {
    // Named siwx and marked so: how agentcash's discovery tells wallet sign-in from an API key.
    siwx: {
      type: 'apiKey',
      in: 'header',
      name: 'SIGN-IN-WITH-X',
      'x-agentcash-auth-kind': 'siwx',
      description:
        'Wallet sign-in (x402 extension sign-in-with-x, CAIP-122 / EIP-4361, eip155:8453, EIP-191 signatures): Base64 JSON of the signed challenge that a 402 answer of the same ' +
        `operation carries in PAYMENT-REQUIRED (extensions["sign-in-with-x"]). Each challenge is accepted once, for the method and path it was issued for, within its expirationTime (at most ${MAX_CHALLENGE_SECONDS} s). ` +
        'On service operations the wallet that paid for the service (the payer of its order) is its owner, as is the API key it was ordered with.',
    },
  },
  schemas: {
    KeyRequest: {
      type: 'object',
      additionalProperties: false,
      properties: {
        name: {
          type: 'string',
          minLength: 1,
          maxLength: 100,
          description: 'A name to tell your keys apart. Default: "wallet <address>".',
        },
      },
    },
    ApiKeyInfo: apiKeyInfo,
    KeyIssued: {
      type: 'object',
      additionalProperties: false,
      required: ['ok', 'api_key', 'key', 'note'],
      properties: {
        ok: { const: true },
        api_key: {
          type: 'string',
          pattern: '^aak_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$',
          description:
            'The key, shown only in this answer (only its hash is stored). Send it as "Authorization: Bearer <api_key>".',
        },
        key: {
          type: 'object',
          additionalProperties: false,
          required: ['id', 'name', 'created_at', 'revoked_at', 'wallet_address'],
          properties: { ...apiKeyInfo.properties, wallet_address: { type: 'string', pattern: '^0x[0-9a-f]{40}$' } },
        },
        note: { type: 'string' },
      },
    },
    WalletKeys: {
      type: 'object',
      additionalProperties: false,
      required: ['ok', 'wallet_address', 'keys'],
      properties: {
        ok: { const: true },
        wallet_address: { type: 'string', pattern: '^0x[0-9a-f]{40}$' },
        keys: { type: 'array', items: ref('ApiKeyInfo') },
      },
    },
    KeyRevoked: {
      type: 'object',
      additionalProperties: false,
      required: ['ok', 'revoked'],
      properties: { ok: { const: true }, revoked: { type: 'string', pattern: '^[0-9a-f]{16}$' } },
    },
    ServiceList: {
      type: 'object',
      additionalProperties: false,
      required: ['ok', 'services'],
      properties: {
        ok: { const: true },
        services: {
          type: 'array',
          maxItems: 100,
          items: ref('Service'),
          description: "The caller's newest 100 services, newest first.",
        },
      },
    },
  },
  paths: {
    '/keys': {
      post: {
        tags: ['Keys'],
        operationId: 'createKey',
        security: walletOnly,
        summary: 'A new agent API key bound to the signed-in wallet (shown once).',
        description:
          'Sign in with the wallet (SIGN-IN-WITH-X); the body is optional. Anyone with a wallet can get a key: keys per wallet and per client address per hour, and live keys per wallet, are limited.',
        requestBody: { required: false, content: { 'application/json': { schema: ref('KeyRequest') } } },
        responses: {
          201: json('The key; api_key is shown only now.', ref('KeyIssued')),
          401: signInRefused,
          402: challenge,
          403: error('agent_signup_disabled: this service does not issue keys to wallets; ask the operator for a key.'),
          409: error(
            'key_limit_reached: the wallet holds as many live keys as allowed; revoke one (DELETE /keys/{key_id}).',
          ),
          413: error('body_too_large'),
          415: error('unsupported_media_type: send the body as application/json.'),
          422: error('invalid_json or invalid_request: the body is not a KeyRequest.'),
          429: tooMany,
        },
      },
      get: {
        tags: ['Keys'],
        operationId: 'listKeys',
        security: walletOnly,
        summary: "The signed-in wallet's keys, revoked ones too (never their secrets).",
        responses: { 200: json('The keys', ref('WalletKeys')), 401: signInRefused, 402: challenge, 429: tooMany },
      },
    },
    '/keys/{key_id}': {
      delete: {
        tags: ['Keys'],
        operationId: 'revokeKey',
        security: walletOnly,
        parameters: [keyId],
        summary: "Revokes one of the signed-in wallet's keys, at once on every instance.",
        responses: {
          200: json('Revoked', ref('KeyRevoked')),
          401: signInRefused,
          402: challenge,
          404: error('key_not_found: the wallet has no live key with this id (GET /keys lists them).'),
          429: tooMany,
        },
      },
    },
    '/services': {
      get: {
        tags: ['Services'],
        operationId: 'listServices',
        security: keyOrWallet,
        summary: 'The services of this API key, or paid for by the signed-in wallet.',
        responses: { 200: json('The services', ref('ServiceList')), 401: signInRefused, 402: challenge, 429: tooMany },
      },
    },
  },
};
