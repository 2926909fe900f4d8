/**
 * The reference for paid purchases: what a minimal real seller on the official @x402/express middleware does, in an
 * Express app of its own process.
 *   POST /orders → paymentMiddleware at $0.27 (exact, eip155:8453, USDC by default) to payTo. With PAYMENT-SIGNATURE:
 *                  the middleware verifies, runs the handler, which commits one order row in PostgreSQL (one INSERT,
 *                  its own transaction, fsync on), then settles and answers 200 with PAYMENT-RESPONSE.
 * The facilitator is the project's in-process one (createFacilitator, embedded mode) on the given chain, paying gas
 * from the dev account given (bench/orders.ts passes one that neither the service nor the bare facilitator uses).
 * The table is the reference's own (schema bench_reference) in the given database.
 * argv: payTo, rpcUrl, chainId, databaseUrl, gas account index (DEV_ACCOUNTS).
 * Prints "listening <port>" on stdout once bound to 127.0.0.1 on a free port; GET /stats answers the rows committed.
 */
import type { AddressInfo } from 'node:net';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import express from 'express';
import pg from 'pg';
import { DEV_ACCOUNTS } from '../src/chain/accounts.js';
import { createFacilitator } from '../src/payments/index.js';

const [payTo, rpcUrl, chainId, databaseUrl, gasAccount] = process.argv.slice(2);
const gasKey = DEV_ACCOUNTS[Number(gasAccount)]?.privateKey;
if (!payTo || !rpcUrl || !chainId || !databaseUrl || !gasKey) {
  throw new Error('usage: x402-express-seller-ref.ts payTo rpcUrl chainId databaseUrl gasAccount');
}
const network = `eip155:${chainId}` as const;

const db = new pg.Pool({ connectionString: databaseUrl });
await db.query(`CREATE SCHEMA IF NOT EXISTS bench_reference;
  CREATE TABLE IF NOT EXISTS bench_reference.orders (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    product_id text NOT NULL,
    request jsonb NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now())`);

const facilitator = createFacilitator({
  mode: 'embedded',
  rpcUrl,
  chainId: Number(chainId),
  privateKey: gasKey,
});
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
app.use(express.json());
app.post('/orders', async (req, res, next) => {
  try {
    const body = req.body as { product_id?: unknown };
    const { rows } = await db.query<{ id: string }>(
      'INSERT INTO bench_reference.orders (product_id, request, status) VALUES ($1, $2, $3) RETURNING id',
      [String(body.product_id ?? ''), JSON.stringify(body), 'active'],
    );
    res.json({ ok: true, order: { id: rows[0].id, status: 'active' } });
  } catch (e) {
    next(e);
  }
});
app.get('/stats', async (_req, res) => {
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM bench_reference.orders');
  res.json({ orders: Number(rows[0].n) });
});

const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => {
  server.close(() => {
    void db.end().finally(() => process.exit(0));
  });
  server.closeAllConnections();
});
