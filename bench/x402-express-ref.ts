/**
 * The reference for the 402 path: the official @x402/express middleware in an Express app of its own process.
 *   POST /orders  → protected by paymentMiddleware at $0.27 (exact, eip155:8453, USDC by default) to argv[2] (payTo);
 *                   without PAYMENT-SIGNATURE the middleware answers 402 with PAYMENT-REQUIRED before any handler runs.
 * The resource server's facilitator is a local stub: it answers getSupported (what initialization asks, once) for
 * exact on eip155:8453 and refuses verify/settle, which the 402 path never calls. No network is used.
 * Express as in the package's README quick start: no body parser, no other middleware.
 * Prints "listening <port>" on stdout once bound to 127.0.0.1 on a free port; stops on SIGTERM.
 */
import type { AddressInfo } from 'node:net';
import type { FacilitatorClient } from '@x402/core/server';
import type { SupportedResponse } from '@x402/core/types';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import express from 'express';

const network = 'eip155:8453';
const payTo = process.argv[2] ?? '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';

const supported: SupportedResponse = {
  kinds: [{ x402Version: 2, scheme: 'exact', network }],
  extensions: [],
  signers: {},
};
let getSupportedCalls = 0;
const facilitator: FacilitatorClient = {
  getSupported: async () => {
    getSupportedCalls++;
    return supported;
  },
  verify: async () => {
    throw new Error('the reference 402 benchmark never verifies');
  },
  settle: async () => {
    throw new Error('the reference 402 benchmark never settles');
  },
};

const resourceServer = new x402ResourceServer(facilitator).register(network, new ExactEvmScheme());

const app = express();
app.disable('x-powered-by');
app.use(
  paymentMiddleware(
    {
      'POST /orders': {
        accepts: { scheme: 'exact', price: '$0.27', network, payTo, maxTimeoutSeconds: 300 },
        description: 'Instant stream (instant-stream) for 0.27 USDC',
        mimeType: 'application/json',
      },
    },
    resourceServer,
  ),
);
app.post('/orders', (_req, res) => {
  res.json({ ok: true });
});
app.get('/stats', (_req, res) => {
  res.json({ getSupportedCalls });
});

const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
