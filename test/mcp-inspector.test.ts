import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequired } from '@x402/core/types';
import { npmScratch, run } from './support/npm-scratch.js';
import { usdcBalance } from './support/refund-chain.js';
import { root, scratchDir, startService, type Service } from './support/service.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

/**
 * The MCP endpoint through the MCP Inspector's command line (@modelcontextprotocol/inspector 2.12, which needs
 * Node ≥ 22.19: both installed from npm into a folder of their own, as the conformance suite is), in the 2026-07-28
 * era (`--protocol-era modern`: server/discover, no initialize, no fallback) and in its automatic mode: tools/list,
 * a free tool, and the paid order tool answered with the signed x402 payment in `_meta["x402/payment"]`
 * (`--tool-metadata`, whose values the CLI sends as JSON). A recording proxy in front of /mcp tells which era the
 * Inspector spoke.
 */
const INSPECTOR = ['@modelcontextprotocol/inspector@2.12.0', 'node@22'];
/** The CLI's exit code when the called tool answered isError (the payment-required result). */
const TOOL_IS_ERROR = 5;

let service: Service;
let wallet: TestWallet;
let rpcUrl: string;
let node: string;
let inspector: string;
let home: string;
let proxy: Server;
let mcpUrl: string;
/** What the Inspector sent: each JSON-RPC method, with the MCP-Protocol-Version header it came with. */
let sent: { method: string; version?: string }[] = [];

before(async () => {
  service = await startService();
  const dev = await devFile(service);
  rpcUrl = dev.chain.rpc_url;
  wallet = new TestWallet(dev.buyer.private_key, rpcUrl);
  const dir = await npmScratch('mcp-inspector', INSPECTOR);
  node = join(dir, 'node_modules/node/bin/node');
  inspector = join(dir, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
  home = await scratchDir('mcp-inspector-home-'); // its catalog and stored auth live under HOME
  proxy = await recordingProxy(new URL(`${service.baseUrl}/mcp`));
  mcpUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/api/v1/mcp`;
});
after(async () => {
  proxy?.close();
  await service?.stop();
});

/** Forwards every request to the MCP endpoint (Host rewritten to it) and records the JSON-RPC methods. */
async function recordingProxy(target: URL): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      try {
        const messages = [JSON.parse(body.toString() || 'null')].flat();
        for (const m of messages)
          if (m?.method) sent.push({ method: m.method, version: req.headers['mcp-protocol-version'] as string });
      } catch {
        // not JSON: forwarded as it is
      }
      const forward = httpRequest(
        target,
        { method: req.method, headers: { ...req.headers, host: target.host } },
        (answer) => {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return server;
}

/** One Inspector CLI run against the endpoint with the agent's key; its JSON output. */
async function inspect(era: string, args: string[]): Promise<{ code: number | null; output: any; stderr: string }> {
  const ran = await run(
    node,
    [
      inspector,
      '--cli',
      mcpUrl,
      '--protocol-era',
      era,
      '--format',
      'json',
      '--header',
      `Authorization: Bearer ${service.apiKey}`,
      ...args,
    ],
    root,
    180_000,
    { HOME: home },
  );
  let output: any;
  try {
    output = JSON.parse(ran.stdout);
  } catch {
    assert.fail(`no JSON from the Inspector (exit ${ran.code}):\n${ran.stdout}\n${ran.stderr}`);
  }
  return { code: ran.code, output, stderr: ran.stderr };
}

const orderArgs = (key: string) => ({
  idempotency_key: key,
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Inspector FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
});

for (const era of ['modern', 'auto']) {
  describe(`MCP Inspector CLI, --protocol-era ${era}`, () => {
    test('tools/list over the 2026-07-28 revision: server/discover, no initialize, the paid tools declared', {
      timeout: 240_000,
    }, async () => {
      sent = [];
      const listed = await inspect(era, ['--method', 'tools/list']);
      assert.equal(listed.code, 0, listed.stderr);
      const tools = new Map((listed.output.result.tools as any[]).map((t) => [t.name, t]));
      for (const name of ['list_products', 'quote', 'order', 'extend_service', 'create_api_key'])
        assert.ok(tools.has(name), `${name} in ${[...tools.keys()]}`);
      assert.equal(tools.get('order')._meta.x402.paymentRequired, true);
      const methods = sent.map((s) => s.method);
      assert.equal(methods[0], 'server/discover', `${methods}`);
      assert.ok(!methods.includes('initialize'), `the 2025 handshake was not used: ${methods}`);
      assert.ok(methods.includes('tools/list'), `${methods}`);
      const listing = sent.find((s) => s.method === 'tools/list')!;
      assert.equal(listing.version, '2026-07-28');
    });

    test('a free tool answers; the paid order answers its payment-required result, then orders once paid', {
      timeout: 240_000,
    }, async () => {
      const products = await inspect(era, ['--method', 'tools/call', '--tool-name', 'list_products']);
      assert.equal(products.code, 0, products.stderr);
      assert.equal(products.output.result.isError, undefined);
      assert.ok(JSON.parse(products.output.result.content[0].text).products.length > 0);

      const args = ['--method', 'tools/call', '--tool-name', 'order', '--tool-args-json'];
      const call = JSON.stringify(orderArgs(`inspector-${era}-${randomUUID()}`));
      const unpaid = await inspect(era, [...args, call]);
      assert.equal(unpaid.code, TOOL_IS_ERROR, unpaid.stderr);
      assert.equal(unpaid.output.result.isError, true);
      const required = unpaid.output.result.structuredContent as PaymentRequired;
      assert.equal(required.x402Version, 2);
      assert.equal(required.resource.url, 'mcp://tool/order');
      const amount = BigInt(required.accepts[0].amount);
      assert.ok(amount > 0n);

      const balance = await usdcBalance(rpcUrl, wallet.address);
      const payload = await wallet.client.createPaymentPayload(required);
      const paid = await inspect(era, [...args, call, '--tool-metadata', `x402/payment=${JSON.stringify(payload)}`]);
      assert.equal(paid.code, 0, `${paid.stderr}\n${JSON.stringify(paid.output)}`);
      const result = paid.output.result;
      assert.equal(result.isError, undefined, JSON.stringify(result));
      assert.equal(result.structuredContent.order.status, 'active');
      assert.equal(result._meta['x402/payment-response'].success, true);
      assert.equal(await usdcBalance(rpcUrl, wallet.address), balance - amount, 'charged once, the quoted amount');
    });
  });
}

describe('MCP Inspector CLI, --protocol-era legacy (its default for a bare URL)', () => {
  test('the 2025 handshake on the same endpoint: initialize, then tools/list and a free tool', {
    timeout: 240_000,
  }, async () => {
    sent = [];
    const listed = await inspect('legacy', ['--method', 'tools/list']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok((listed.output.result.tools as any[]).some((t) => t.name === 'order'));
    const methods = sent.map((s) => s.method);
    assert.equal(methods[0], 'initialize', `${methods}`);
    assert.ok(!methods.includes('server/discover'), `${methods}`);
    assert.match(sent.find((s) => s.method === 'tools/list')!.version ?? '', /^2025-/);
    const products = await inspect('legacy', ['--method', 'tools/call', '--tool-name', 'list_products']);
    assert.equal(products.code, 0, products.stderr);
    assert.ok(JSON.parse(products.output.result.content[0].text).products.length > 0);
  });
});
