import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { generatePrivateKey } from 'viem/accounts';
import { startChain, startFacilitator, startProduction, type Chain } from './support/production.js';
import { request, scratchDir, type Service } from './support/service.js';

/**
 * Refunds are sent through X402_RPC_URL from the refund wallet: in production GET /health says degraded (and the
 * operator's details say why) when that endpoint takes no transactions, as read-only RPC gateways do, or when the
 * refund wallet holds no USDC; a writable node and a funded wallet are ok.
 */

let chain: Chain;
let facilitator: Awaited<ReturnType<typeof startFacilitator>>;
const cleanups: Array<() => Promise<unknown>> = [];

before(async () => {
  chain = await startChain();
  facilitator = await startFacilitator(chain.rpcUrl);
});
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await facilitator?.stop();
  await chain?.stop();
});

/** A JSON-RPC gateway in front of the chain that serves reads and refuses eth_sendRawTransaction, as read-only ones do. */
async function readOnlyGateway(upstream: string): Promise<string> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString()) as { id: unknown; method: string };
    if (body.method === 'eth_sendRawTransaction') {
      const message = 'the method eth_sendRawTransaction does not exist/is not available';
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', id: body.id, error: { code: -32601, message } }));
    }
    const answer = await fetch(upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.concat(chunks),
    });
    res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function production(env: Record<string, string> = {}): Promise<Service> {
  const service = await startProduction(chain, facilitator.url, env);
  cleanups.push(() => service.stop());
  return service;
}

async function refundsCheck(service: Service) {
  const health = await request(service, 'GET', '/health');
  const details = (await (await fetch(service.metricsUrl.replace(/\/metrics$/, '/health/details'))).json()) as {
    checks: { refunds: { ok: boolean; error?: string; wallet?: string } };
  };
  return { status: health.body.status as string, ok: health.body.checks.refunds?.ok, details: details.checks.refunds };
}

test('refunds: a read-only X402_RPC_URL and a refund wallet without USDC make health degraded, saying why', async () => {
  const dir = await scratchDir('audio-refund-health-');
  await writeFile(join(dir, 'dry.key'), generatePrivateKey(), { mode: 0o600 });
  const [writable, readOnly, dry] = await Promise.all([
    production(),
    readOnlyGateway(chain.rpcUrl).then((url) => production({ X402_RPC_URL: url })),
    production({ X402_REFUND_KEY_FILE: join(dir, 'dry.key') }),
  ]);

  const fine = await refundsCheck(writable);
  assert.equal(fine.ok, true, JSON.stringify(fine.details));

  const refused = await refundsCheck(readOnly);
  assert.equal(refused.status, 'degraded');
  assert.equal(refused.ok, false);
  assert.match(
    refused.details.error!,
    /X402_RPC_URL takes no transactions \(eth_sendRawTransaction: -32601 the method eth_sendRawTransaction does not exist/,
  );

  const short = await refundsCheck(dry);
  assert.equal(short.status, 'degraded');
  assert.equal(short.ok, false);
  assert.match(short.details.error!, /the refund wallet holds no USDC: refunds wait/);
});
