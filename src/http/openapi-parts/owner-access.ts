import { error, rateLimited, ref } from './common.js';

// What every owner route of a service (/services/{service_id}/…) shares in the document: who may call it, the
// service_id parameter and the errors of finding the caller's service.

/** The key it was ordered with, or the wallet that paid for it, signed in; {}: without credentials, the sign-in 402. */
export const owner = { security: [{ agentApiKey: [] }, { siwx: [] }, {}], tags: ['Services'] };

export const serviceIdParameter = {
  name: 'service_id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' },
  description: 'service.service_id from your order.',
};

export const ownerErrors = {
  401: error('No valid API key: send "Authorization: Bearer <AGENT_API_KEY>", or sign in with the wallet that paid.'),
  402: {
    description:
      'authentication_required: no credentials were sent. PAYMENT-REQUIRED carries the wallet sign-in ' +
      'challenge (see GET /services/{service_id}).',
    headers: {
      'PAYMENT-REQUIRED': {
        description: 'x402 v2 PaymentRequired (sign-in only), Base64-encoded JSON.',
        schema: { type: 'string' },
      },
    },
    content: { 'application/json': { schema: ref('PaymentRequired') } },
  },
  404: error('service_not_found: no such service for this API key or wallet.'),
  429: rateLimited,
  503: error('not_available: streaming is off on this deployment (retryable).'),
};
