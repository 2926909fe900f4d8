/**
 * The HTTP baseline: a bare Koa app in its own process (no router, no middleware).
 *   GET /products  → the bytes of the file named by argv[2] (the real service's GET /products response)
 *   POST /echo     → reads the JSON body from the stream, JSON.parse, answers a JSON object about the size of a quote
 * Prints "listening <port>" on stdout once bound to 127.0.0.1 on a free port; stops on SIGTERM.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';

const products = readFileSync(process.argv[2]);
let served = 0;

const app = new Koa();
app.silent = true;
app.use(async (ctx) => {
  if (ctx.method === 'GET' && ctx.path === '/products') {
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = products;
    return;
  }
  if (ctx.method === 'POST' && ctx.path === '/echo') {
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req as AsyncIterable<Buffer>) chunks.push(chunk);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      product_id?: string;
      parameters?: Record<string, unknown>;
    };
    ctx.body = echoDocument(body, ++served);
    return;
  }
  ctx.status = 404;
});

/** Shaped like a quote response (~1.1 kB of JSON), built fresh for each request. */
function echoDocument(body: { product_id?: string; parameters?: Record<string, unknown> }, n: number) {
  const now = new Date();
  const line = (code: string, quantity: string, unit: string, rate: string) => ({
    code,
    quantity,
    unit,
    rate,
    rate_atomic: rate,
    amount_atomic: rate,
    amount: rate,
  });
  return {
    ok: true,
    quote: {
      id: `qt_echo_${n}`,
      product: { id: body.product_id, name: 'Echo', type: 'echo', billing_type: 'quote', pricing_model: 'formula' },
      configuration: body.parameters ?? {},
      price: { amount: '0.31', amount_atomic: '310000', currency: 'USDC', decimals: 6 },
      currency: 'USDC',
      breakdown: [
        line('base', '1', 'order', '250000'),
        line('duration', '3', 'hour', '20000'),
        line('transfer', '0', 'GB', '15000'),
      ],
      formula: 'base + (duration_hours x 0.02 USDC) + (transfer_gb x 0.015 USDC)',
      transfer_policy: 'estimated_included_limit',
      created_at: now.toISOString(),
      expires_at_quote: new Date(now.getTime() + 300_000).toISOString(),
      pricing_status: 'approved',
      agent_orderable: true,
      audit: {
        evaluation_id: `ev_echo_${n}`,
        catalog_hash: 'sha256:0000000000000000000000000000000000000000000000000000000000000000',
      },
    },
  };
}

const server = app.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
