import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { PaymentRequired } from '@x402/core/types';
import type { SIWxExtension } from '@x402/extensions/sign-in-with-x';
import { privateKeyToAccount } from 'viem/accounts';
import { USDC_ADDRESS } from '../src/chain/token.js';
import { request, startService, type Service } from './support/service.js';
import { signedHeader } from './support/siwx.js';
import { requireStreamingTools } from './support/system-tools.js';
import { TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

/**
 * The MCP endpoint in the 2026-07-28 revision (no session, no initialize: protocol version and client capabilities in
 * each request's _meta) beside the 2025 eras, with the SDK 2.x client; and an agent that signs in once with its
 * wallet, gets a key with create_api_key, and buys, extends and stops a stream with that key.
 */
requireStreamingTools();

const MODERN = '2026-07-28';
let service: Service;
let wallet: TestWallet;
let buyerKey: `0x${string}`;
let databaseUrl: string;
const clients: Client[] = [];

before(async () => {
  // Two live keys per wallet: the key tests below make four, two of them revoked or expired.
  service = await startService({ AGENT_SIGNUP_LIVE_KEYS_PER_WALLET: '2' });
  const dev = await devFile(service);
  buyerKey = dev.buyer.private_key;
  wallet = new TestWallet(buyerKey, dev.chain.rpc_url);
  databaseUrl = (await serveLock(service)).database_url;
});
after(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await service?.stop();
});

type Negotiation = 'legacy' | 'auto' | { pin: string };

/** An SDK 2.x client over Streamable HTTP with these headers on its requests. */
async function sdkClient(
  headers: Record<string, string>,
  mode: Negotiation = { pin: MODERN },
  versions?: string[],
): Promise<Client> {
  const client = new Client(
    { name: 'modern-agent', version: '1.0.0' },
    { versionNegotiation: { mode }, ...(versions && { supportedProtocolVersions: versions }) },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`), { requestInit: { headers } }),
  );
  clients.push(client);
  return client;
}

const call = (client: Client, name: string, args: Record<string, unknown>, meta?: Record<string, unknown>) =>
  client.callTool({ name, arguments: args, ...(meta && { _meta: meta }) }) as Promise<any>;

function errorOf(result: any): { code: string; message: string } {
  assert.equal(result.isError, true, JSON.stringify(result));
  const texts = result.content.map((c: { text: string }) => JSON.parse(c.text));
  return texts.find((d: any) => d?.ok === false).error;
}

/** A tool call paid the way an agent pays over MCP: unpaid, then again with the signed payload in _meta. */
async function paidCall(client: Client, name: string, args: Record<string, unknown>) {
  const unpaid = await call(client, name, args);
  const required = unpaid.structuredContent as PaymentRequired;
  assert.equal(required.x402Version, 2, JSON.stringify(unpaid));
  const payload = await wallet.client.createPaymentPayload(required);
  const paid = await call(client, name, args, { 'x402/payment': payload });
  assert.equal(paid.isError, undefined, JSON.stringify(paid));
  assert.equal(paid._meta['x402/payment-response'].success, true);
  return { paid, amount: BigInt(required.accepts[0].amount) };
}

/** A raw 2026-07-28 request: the protocol version and client capabilities travel in its _meta and headers. */
async function modernPost(method: string, params: Record<string, unknown> = {}) {
  const response = await fetch(`${service.baseUrl}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': method,
      ...(typeof params.name === 'string' && { 'mcp-name': params.name }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('mcp-session-id'), null, 'no session');
  return ((await response.json()) as { result: any }).result;
}

async function signInChallenge(client: Client): Promise<SIWxExtension> {
  const asked = await call(client, 'create_api_key', {});
  assert.equal(errorOf(asked).code, 'authentication_required');
  const challenge = asked.structuredContent.extensions?.['sign-in-with-x'];
  assert.ok(challenge, `the sign-in challenge as PaymentRequired: ${JSON.stringify(asked)}`);
  return challenge;
}

async function withDatabase<T>(use: (client: import('pg').Client) => Promise<T>): Promise<T> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

describe('MCP 2026-07-28 beside the 2025 eras; one sign-in, then a key', () => {
  test('server/discover, cache fields and resultType for a 2026-07-28 client; 2025-11-25 and 2025-06-18 clients on the same endpoint', async () => {
    const modern = await sdkClient({});
    assert.equal(modern.getProtocolEra(), 'modern');
    assert.deepEqual(modern.getDiscoverResult()?.supportedVersions, [MODERN]);
    const listed = (await modern.listTools()).tools;
    const order = listed.find((t) => t.name === 'order')!;
    assert.equal((order._meta as any).x402.paymentRequired, true, 'paid tools keep their x402 declaration');
    assert.match(listed.find((t) => t.name === 'create_api_key')!.description!, /Sign in once/);

    const discovered = await modernPost('server/discover');
    assert.deepEqual(discovered.supportedVersions, [MODERN]);
    assert.deepEqual(discovered.capabilities, { tools: { listChanged: false } });
    assert.equal(discovered.resultType, 'complete');
    const tools = await modernPost('tools/list');
    assert.deepEqual([tools.ttlMs, tools.cacheScope, tools.resultType], [60_000, 'public', 'complete']);
    const products = await modernPost('tools/call', { name: 'list_products', arguments: {} });
    assert.equal(products.resultType, 'complete');
    assert.equal(products.structuredContent.ok, true);

    assert.equal((await sdkClient({}, 'auto')).getProtocolEra(), 'modern', 'auto negotiation picks the modern era');
    for (const version of ['2025-11-25', '2025-06-18']) {
      const legacy = await sdkClient({}, 'legacy', [version]);
      assert.equal(legacy.getProtocolEra(), 'legacy');
      assert.equal(legacy.getNegotiatedProtocolVersion(), version);
      assert.equal((await legacy.listTools()).tools.length, listed.length);
    }
  });

  test('one wallet sign-in gives a key over MCP; with it the agent buys, extends and stops a stream; then revokes it', {
    timeout: 240_000,
  }, async () => {
    const anonymous = await sdkClient({});
    const account = privateKeyToAccount(buyerKey);
    const header = await signedHeader(await signInChallenge(anonymous), account);
    const signedIn = await sdkClient({ 'sign-in-with-x': header });
    const created = await call(signedIn, 'create_api_key', { name: 'modern agent', expires_in_hours: 2 });
    assert.equal(created.isError, undefined, JSON.stringify(created));
    const { api_key: apiKey, key } = created.structuredContent;
    assert.match(apiKey, /^aak_[0-9a-f]{16}_/);
    assert.equal(key.wallet_address, account.address.toLowerCase());
    const lifetime = Date.parse(key.expires_at) - Date.parse(key.created_at);
    assert.ok(Math.abs(lifetime - 2 * 3_600_000) < 60_000, `expires in 2 h: ${key.created_at} → ${key.expires_at}`);
    // The signed message was good once: the next call needs the key.
    assert.equal(errorOf(await call(signedIn, 'create_api_key', {})).code, 'siwx_nonce_used');

    const agent = await sdkClient({ authorization: `Bearer ${apiKey}` });
    const before = await wallet.balanceOf(USDC_ADDRESS, wallet.address);
    const bought = await paidCall(agent, 'order', {
      idempotency_key: randomUUID(),
      product_id: 'instant-stream',
      email: 'modern@example.com',
      station_name: 'Modern FM',
      parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
    });
    const serviceId = bought.paid.structuredContent.service.service_id;
    assert.equal(bought.paid.structuredContent.order.status, 'active');
    const expiresAt = Date.parse(bought.paid.structuredContent.service.expires_at);

    const extended = await paidCall(agent, 'extend_service', {
      service_id: serviceId,
      duration_hours: 2,
      idempotency_key: randomUUID(),
    });
    assert.equal(Date.parse(extended.paid.structuredContent.service.expires_at) - expiresAt, 2 * 3_600_000);
    assert.equal(
      await wallet.balanceOf(USDC_ADDRESS, wallet.address),
      before - bought.amount - extended.amount,
      'charged the order and the extension once each',
    );
    // The key is a REST key too: the service is its own there.
    assert.equal((await request({ ...service, apiKey }, 'GET', `/services/${serviceId}`)).status, 200);

    const stopped = await call(agent, 'stop_service', { service_id: serviceId });
    assert.equal(stopped.isError, undefined, JSON.stringify(stopped));
    assert.equal(stopped.structuredContent.ended.reason, 'stopped');
    assert.deepEqual(stopped.structuredContent.refund.order_ids, [
      bought.paid.structuredContent.order.id,
      extended.paid.structuredContent.order.id,
    ]);

    const revoked = await call(agent, 'revoke_api_key', {});
    assert.deepEqual(revoked.structuredContent, { ok: true, revoked: key.id });
    assert.equal(errorOf(await call(agent, 'service_status', { service_id: serviceId })).code, 'invalid_api_key');
  });

  test('a key got over MCP is refused once it expires, as a revoked one is', { timeout: 120_000 }, async () => {
    const anonymous = await sdkClient({});
    const header = await signedHeader(await signInChallenge(anonymous), privateKeyToAccount(buyerKey));
    const created = await call(await sdkClient({ 'sign-in-with-x': header }), 'create_api_key', {});
    const { api_key: apiKey, key } = created.structuredContent;
    const lifetime = Date.parse(key.expires_at) - Date.parse(key.created_at);
    assert.ok(Math.abs(lifetime - 24 * 3_600_000) < 60_000, 'a day unless asked otherwise');
    // Its expiry as if a day had passed: the key is refused as a revoked one is.
    await withDatabase((db) =>
      db.query("UPDATE api_keys SET expires_at = now() - interval '1 s' WHERE id = $1", [key.id]),
    );
    const agent = await sdkClient({ authorization: `Bearer ${apiKey}` });
    const quoteArgs = {
      product_id: 'instant-stream',
      parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
    };
    const refused = errorOf(await call(agent, 'quote', quoteArgs));
    assert.equal(refused.code, 'invalid_api_key');
    assert.match(refused.message, /expired/);
    assert.equal((await request({ ...service, apiKey }, 'GET', '/services/svc_doesnotexist')).status, 401);
  });

  test('keys made over MCP have the caps of REST keys: at most two live per wallet here, revoked and expired ones not counted', {
    timeout: 120_000,
  }, async () => {
    const account = privateKeyToAccount(buyerKey);
    const anonymous = await sdkClient({});
    const createKey = async () => {
      const header = await signedHeader(await signInChallenge(anonymous), account);
      return call(await sdkClient({ 'sign-in-with-x': header }), 'create_api_key', {});
    };
    for (let i = 0; i < 2; i++) assert.equal((await createKey()).isError, undefined, `live key ${i + 1}`);
    const refused = errorOf(await createKey());
    assert.equal(refused.code, 'key_limit_reached');
    assert.match(refused.message, /holds 2 live keys \(at most 2\)/);
    assert.match(refused.message, /revoke_api_key tool/);
    assert.doesNotMatch(refused.message, /\b(?:GET|DELETE) \//);
  });
});
