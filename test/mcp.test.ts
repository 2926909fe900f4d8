import assert from 'node:assert/strict';
import { type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { PaymentRequired } from '@x402/core/types';
import { validateDiscoveryExtension } from '@x402/extensions/bazaar';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { connectListener, hasMpegFrame, startFfmpegSource, waitFor, type Listener } from './support/streaming.js';
import { signedHeader } from './support/siwx.js';
import { TestWallet } from './support/wallet.js';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { requireStreamingTools } from './support/system-tools.js';
import { devFile } from './support/dev-file.js';

requireStreamingTools();

let service: Service;
let wallet: TestWallet;
let buyerKey: `0x${string}`;
let agent: Client;
let anonymous: Client;
const processes: ChildProcess[] = [];
const listeners: Listener[] = [];

/** An MCP client as an agent runs it: the SDK's own Client over its Streamable HTTP transport. */
async function mcpClient(apiKey?: string): Promise<Client> {
  return mcpClientWith(apiKey ? { authorization: `Bearer ${apiKey}` } : {});
}

async function mcpClientWith(headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`), { requestInit: { headers } });
  await client.connect(transport);
  return client;
}

before(async () => {
  service = await startService();
  const dev = await devFile(service);
  buyerKey = dev.buyer.private_key;
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  agent = await mcpClient(service.apiKey);
  anonymous = await mcpClient();
});
after(async () => {
  for (const l of listeners) l.close();
  for (const p of processes) p.kill('SIGKILL');
  await agent?.close();
  await anonymous?.close();
  await service?.stop();
});

const call = (client: Client, name: string, args: Record<string, unknown>, meta?: Record<string, unknown>) =>
  client.callTool({ name, arguments: args, ...(meta && { _meta: meta }) }) as Promise<any>;

const streamOrder = (key: string) => ({
  idempotency_key: key,
  product_id: 'instant-stream',
  email: 'mcp@example.com',
  station_name: 'MCP FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
});

/** The error document of a failed tool call (its last text for a payment error, which leads with PaymentRequired). */
function errorOf(result: any): {
  code: string;
  message: string;
  retryable: boolean;
  request_id: string;
  details?: any[];
} {
  assert.equal(result.isError, true, JSON.stringify(result));
  const document =
    'x402Version' in result.structuredContent ? JSON.parse(result.content[1].text) : result.structuredContent;
  assert.equal(document.ok, false);
  assert.equal(typeof document.error.request_id, 'string');
  return document.error;
}

describe('MCP', () => {
  test('tools/list: every tool, input schemas generated from the catalog as /openapi.json publishes them', async () => {
    const { tools } = await anonymous.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [
      'create_api_key',
      'describe_product',
      'extend_service',
      'list_products',
      'order',
      'quote',
      'retain_recordings',
      'revoke_api_key',
      'service_events',
      'service_status',
      'service_usage',
      'set_playlist',
      'stop_service',
      'upgrade_service',
    ]);
    const openapi = (await request(service, 'GET', '/openapi.json')).body;
    const byName = new Map(tools.map((t) => [t.name, t.inputSchema as any]));
    for (const name of ['quote', 'order']) {
      const schema = byName.get(name);
      assert.ok(schema.properties.product_id.enum.includes('instant-stream'), name);
      const branch = schema.oneOf.find((b: any) => b.properties.product_id.const === 'instant-stream');
      // Compared without annotations: /openapi.json states defaults in the descriptions (for generated typed clients).
      const shapeOf = (value: unknown) =>
        JSON.parse(
          JSON.stringify(value, (key, inner) => (key === 'default' || key === 'description' ? undefined : inner)),
        );
      assert.deepEqual(
        shapeOf(branch.properties.parameters),
        shapeOf(openapi.components.schemas.Parameters_instant_stream),
        `${name}: the same parameters schema`,
      );
      assert.ok(branch.properties.parameters.properties.bitrate_kbps, name);
    }
    assert.ok(byName.get('order').required.includes('idempotency_key'));
    assert.ok(byName.get('order').properties.email, 'the order request fields');
    assert.ok(byName.get('upgrade_service').required.includes('service_id'));
  });

  test('discovery tools are public and answer the REST documents', async () => {
    const listed = await call(anonymous, 'list_products', {});
    assert.equal(listed.isError, undefined);
    assert.deepEqual(listed.structuredContent, (await request(service, 'GET', '/products', { auth: false })).body);
    assert.deepEqual(JSON.parse(listed.content[0].text), listed.structuredContent);
    const described = await call(anonymous, 'describe_product', { product_id: 'instant-stream' });
    assert.equal(described.structuredContent.product.id, 'instant-stream');
    assert.equal(described.structuredContent.parameters_schema.properties.max_listeners.type, 'integer');
    assert.equal(
      errorOf(await call(anonymous, 'describe_product', { product_id: 'no-such-product' })).code,
      'product_not_found',
    );
  });

  test('quote needs the API key, then prices as POST /quotes', async () => {
    const parameters = { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 };
    assert.equal(
      errorOf(await call(anonymous, 'quote', { product_id: 'instant-stream', parameters })).code,
      'authentication_required',
    );
    const quoted = await call(agent, 'quote', { product_id: 'instant-stream', parameters });
    assert.equal(quoted.isError, undefined, JSON.stringify(quoted));
    const rest = await request(service, 'POST', '/quotes', { body: { product_id: 'instant-stream', parameters } });
    assert.equal(quoted.structuredContent.quote.price.amount_atomic, rest.body.quote.price.amount_atomic);
  });

  test('order: PaymentRequired, paid with the official x402 client in _meta, settled once; the stream works; a replay gives the same order', {
    timeout: 120_000,
  }, async () => {
    const args = streamOrder(randomUUID());
    const unpaid = await call(agent, 'order', args);
    assert.equal(unpaid.isError, true);
    const required = unpaid.structuredContent as PaymentRequired;
    assert.equal(required.x402Version, 2);
    assert.equal(required.resource.url, 'mcp://tool/order');
    assert.equal(required.accepts.length, 1);
    assert.deepEqual(JSON.parse(unpaid.content[0].text), required, 'content[0].text is the same PaymentRequired');
    assert.equal(errorOf(unpaid).code, 'payment_required');
    const { asset, amount, payTo } = required.accepts[0];
    // x402 discovery of the tool (bazaar, MCP form): its name and the input schema tools/list publishes.
    const bazaar = required.extensions!.bazaar as any;
    assert.equal(
      validateDiscoveryExtension(bazaar).valid,
      true,
      JSON.stringify(validateDiscoveryExtension(bazaar).errors),
    );
    assert.equal(bazaar.info.input.type, 'mcp');
    assert.equal(bazaar.info.input.toolName, 'order');
    const listed = (await agent.listTools()).tools.find((t) => t.name === 'order')!;
    const published = listed.inputSchema as any;
    assert.deepEqual(
      bazaar.info.input.inputSchema,
      {
        ...published,
        properties: {
          ...published.properties,
          product_id: { ...published.properties.product_id, enum: ['instant-stream'] },
        },
        oneOf: published.oneOf.filter((b: any) => b.properties.product_id.const === 'instant-stream'),
      },
      'the published schema narrowed to the ordered product',
    );

    const payload = await wallet.client.createPaymentPayload(required);
    const before = await wallet.balanceOf(asset, wallet.address);
    const receivedBefore = await wallet.balanceOf(asset, payTo);
    const paid = await call(agent, 'order', args, { 'x402/payment': payload });
    assert.equal(paid.isError, undefined, JSON.stringify(paid));
    const { order, service: bought, idempotent_replay } = paid.structuredContent;
    assert.equal(order.status, 'active');
    assert.equal(order.amount.amount_atomic, amount);
    assert.equal(idempotent_replay, false);
    const settlement = paid._meta['x402/payment-response'];
    assert.equal(settlement.success, true);
    assert.match(settlement.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(settlement.transaction, order.payment.transaction);
    assert.equal(settlement.payer.toLowerCase(), wallet.address.toLowerCase());
    assert.equal(await wallet.balanceOf(asset, wallet.address), before - BigInt(amount));
    assert.equal(await wallet.balanceOf(asset, payTo), receivedBefore + BigInt(amount));

    // One order machinery: the REST API knows the order.
    const rest = await request(service, 'GET', `/orders/${order.id}`);
    assert.equal(rest.status, 200);
    assert.equal(rest.body.service.service_id, bought.service_id);

    const encoder = startFfmpegSource(bought.broadcast_url);
    processes.push(encoder);
    const listener = await waitFor(
      'the mount to go live',
      async () => {
        const l = await connectListener(bought.stream_url).catch(() => undefined);
        if (l?.status === 200) return l;
        l?.close();
        return undefined;
      },
      30_000,
    );
    listeners.push(listener);
    await waitFor('MP3 bytes', () => listener.received().length >= 8000 && hasMpegFrame(listener.received()), 20_000);

    const status = await call(agent, 'service_status', { service_id: bought.service_id });
    assert.equal(status.structuredContent.service.status, 'active');
    assert.equal(status.structuredContent.evaluation_id, order.evaluation_id);
    assert.equal(status.structuredContent.listen.page, status.structuredContent.service.endpoints.listen_page);
    assert.match(status.structuredContent.listen.page, /\/listen\/svc_/);
    assert.equal(status.structuredContent.listen.now_playing, null, 'nothing announced yet');
    const usage = await call(agent, 'service_usage', { service_id: bought.service_id });
    assert.equal(usage.structuredContent.usage.source.bought_kbps, 64);
    assert.equal(
      errorOf(await call(anonymous, 'service_usage', { service_id: bought.service_id })).code,
      'authentication_required',
    );

    // Events over MCP: read, then followed with last_event_id (the call waits for the next one).
    const events = await call(agent, 'service_events', { service_id: bought.service_id, wait_seconds: 0 });
    const types = events.structuredContent.events.map((e: { type: string }) => e.type);
    for (const type of ['order.paid', 'service.active', 'source.connected'])
      assert.ok(types.includes(type), `${type} in ${types}`);
    const next = call(agent, 'service_events', {
      service_id: bought.service_id,
      last_event_id: events.structuredContent.last_event_id,
      wait_seconds: 25,
    });
    encoder.kill('SIGKILL');
    const followed = (await next).structuredContent.events.map((e: { type: string }) => e.type);
    assert.deepEqual(followed, ['source.disconnected'], 'only the later event, which came while the call waited');
    assert.equal(
      errorOf(await call(agent, 'service_events', { service_id: bought.service_id, last_event_id: 'evt_nosuchevent' }))
        .code,
      'unknown_last_event_id',
    );

    const replay = await call(agent, 'order', args, { 'x402/payment': payload });
    assert.equal(replay.isError, undefined, JSON.stringify(replay));
    assert.equal(replay.structuredContent.order.id, order.id);
    assert.equal(replay.structuredContent.idempotent_replay, true);
    assert.equal(replay._meta['x402/payment-response'].transaction, settlement.transaction);
    assert.equal(await wallet.balanceOf(asset, wallet.address), before - BigInt(amount), 'charged once');

    // The same idempotency: POST /orders with this key and the same order request answers this order too.
    const { idempotency_key: key, ...body } = args;
    const overRest = await request(service, 'POST', '/orders', { body, headers: { 'idempotency-key': key } });
    assert.equal(overRest.status, 200, JSON.stringify(overRest.body));
    assert.equal(overRest.body.order.id, order.id);
    assert.equal(overRest.body.idempotent_replay, true);

    const otherBody = await call(agent, 'order', { ...args, station_name: 'Other FM' }, { 'x402/payment': payload });
    assert.equal(errorOf(otherBody).code, 'idempotency_key_reused');
  });

  test('service tools accept the wallet that paid, signed in with SIGN-IN-WITH-X on the HTTP transport, with no key', {
    timeout: 120_000,
  }, async () => {
    const { idempotency_key: _, ...body } = streamOrder(randomUUID());
    const bought = await buy(service, wallet, body);
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const serviceId = bought.body.service.service_id;
    const asked = await call(anonymous, 'service_status', { service_id: serviceId });
    const challenge = asked.structuredContent.extensions?.['sign-in-with-x'];
    assert.ok(challenge, `the sign-in challenge as PaymentRequired: ${JSON.stringify(asked)}`);
    assert.equal(errorOf(asked).code, 'authentication_required');

    const signedIn = await mcpClientWith({
      'sign-in-with-x': await signedHeader(challenge, privateKeyToAccount(buyerKey)),
    });
    const status = await call(signedIn, 'service_status', { service_id: serviceId });
    assert.equal(status.isError, undefined, JSON.stringify(status));
    assert.equal(status.structuredContent.service.service_id, serviceId);
    // One signed message serves one service call: its nonce is used up.
    assert.equal(errorOf(await call(signedIn, 'service_usage', { service_id: serviceId })).code, 'siwx_nonce_used');
    await signedIn.close();

    const stranger = privateKeyToAccount(generatePrivateKey());
    const again = await call(anonymous, 'service_status', { service_id: serviceId });
    const other = await mcpClientWith({
      'sign-in-with-x': await signedHeader(again.structuredContent.extensions['sign-in-with-x'], stranger),
    });
    assert.equal(errorOf(await call(other, 'service_status', { service_id: serviceId })).code, 'service_not_found');
    await other.close();
  });

  test('upgrade_service is paid over MCP like an order; set_playlist answers as PUT /playlist', {
    timeout: 120_000,
  }, async () => {
    const live = (
      await buy(service, wallet, {
        product_id: 'instant-stream',
        email: 'up@example.com',
        station_name: 'Up FM',
        parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
      })
    ).body;
    const args = { service_id: live.service.service_id, product_id: 'event-stream', idempotency_key: randomUUID() };
    const unpaid = await call(agent, 'upgrade_service', args);
    const required = unpaid.structuredContent as PaymentRequired;
    assert.equal(required.resource.url, `mcp://tool/upgrade_service?service_id=${live.service.service_id}`);
    const paid = await call(agent, 'upgrade_service', args, {
      'x402/payment': await wallet.client.createPaymentPayload(required),
    });
    assert.equal(paid.isError, undefined, JSON.stringify(paid));
    assert.equal(paid.structuredContent.order.upgrade_of, live.service.service_id);
    assert.equal(paid._meta['x402/payment-response'].success, true);
    assert.equal(
      (await call(agent, 'service_status', { service_id: live.service.service_id })).structuredContent.status_reason,
      'Upgraded from instant-stream to event-stream.',
    );

    assert.equal(
      errorOf(await call(agent, 'set_playlist', { service_id: live.service.service_id, playlist: [] })).code,
      'storage_not_included',
    );
    const autodj = (
      await buy(service, wallet, {
        product_id: 'temporary-autodj',
        email: 'dj@example.com',
        station_name: 'Auto FM',
        parameters: { duration_hours: 1, bitrate_kbps: 64, storage_mb: 1, listeners: 2 },
      })
    ).body;
    const unknown = errorOf(
      await call(agent, 'set_playlist', { service_id: autodj.service.service_id, playlist: ['missing.mp3'] }),
    );
    assert.equal(unknown.code, 'unknown_files');
    assert.equal(unknown.details![0].pointer, '/playlist/0');
    const set = await call(agent, 'set_playlist', {
      service_id: autodj.service.service_id,
      playlist: [],
      shuffle: true,
    });
    assert.deepEqual(set.structuredContent, { ok: true, playlist: [], shuffle: true });

    // stop_service answers as POST /services/{id}/stop: the service ends, its refund is stated, a repeat is the same refund.
    const stopped = await call(agent, 'stop_service', { service_id: live.service.service_id });
    assert.equal(stopped.isError, undefined, JSON.stringify(stopped));
    assert.equal(stopped.structuredContent.service.status, 'expired');
    assert.equal(stopped.structuredContent.ended.reason, 'stopped');
    assert.deepEqual(stopped.structuredContent.refund.order_ids, [live.order.id, paid.structuredContent.order.id]);
    const again = await call(agent, 'stop_service', { service_id: live.service.service_id });
    assert.equal(again.structuredContent.refund.id, stopped.structuredContent.refund.id);
    assert.equal(again.structuredContent.idempotent_replay, true);
    assert.equal(
      errorOf(await call(agent, 'stop_service', { service_id: 'svc_nosuchservice' })).code,
      'service_not_found',
    );
  });

  test('extend_service is paid over MCP with _meta["x402/payment"]: the expiry moves by the hours bought; a replay is not charged again', {
    timeout: 120_000,
  }, async () => {
    const live = (
      await buy(service, wallet, {
        product_id: 'instant-stream',
        email: 'ext@example.com',
        station_name: 'Ext FM',
        parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
      })
    ).body;
    const args = { service_id: live.service.service_id, duration_hours: 100, idempotency_key: randomUUID() };
    const unpaid = await call(agent, 'extend_service', args);
    const required = unpaid.structuredContent as PaymentRequired;
    assert.equal(required.resource.url, `mcp://tool/extend_service?service_id=${live.service.service_id}`);
    assert.equal(required.accepts[0].amount, '2000000', '100 hours at 0.02 USDC');
    const { asset, payTo } = required.accepts[0];
    const sellerBefore = await wallet.balanceOf(asset, payTo);
    const paid = await call(agent, 'extend_service', args, {
      'x402/payment': await wallet.client.createPaymentPayload(required),
    });
    assert.equal(paid.isError, undefined, JSON.stringify(paid));
    assert.equal(paid.structuredContent.order.extension_of, live.service.service_id);
    assert.equal(paid._meta['x402/payment-response'].success, true);
    assert.equal(
      Date.parse(paid.structuredContent.service.expires_at) - Date.parse(live.service.expires_at),
      100 * 3_600_000,
    );
    const replay = await call(agent, 'extend_service', args);
    assert.equal(replay.structuredContent.idempotent_replay, true);
    assert.equal(replay.structuredContent.order.id, paid.structuredContent.order.id);
    assert.equal((await wallet.balanceOf(asset, payTo)) - sellerBefore, 2_000_000n, 'charged once');
    const stranger = await mcpClient(
      JSON.parse((await service.cli(['keys', 'create', '--name', 'mcp-stranger'])).stdout).api_key,
    );
    assert.equal(
      errorOf(await call(stranger, 'extend_service', { ...args, idempotency_key: randomUUID() })).code,
      'service_not_found',
    );
    await stranger.close();

    // Less than the product's minimum duration (1 h) is not sold: refused before any PaymentRequired.
    const short = await call(agent, 'extend_service', { ...args, duration_hours: 0.5, idempotency_key: randomUUID() });
    assert.equal(short.isError, true, JSON.stringify(short));
    assert.equal(short.structuredContent.ok, false, 'an error document, no PaymentRequired');
    const tooShort = errorOf(short);
    assert.equal(tooShort.code, 'extension_too_short');
    assert.match(tooShort.message, /at least 1 hour .*duration_hours of 1 or more/);
    assert.equal(tooShort.details![0].pointer, '/duration_hours');
  });

  test('a payment that is not an x402 payload gets the PaymentRequired again; nothing is charged', async () => {
    const result = await call(agent, 'order', streamOrder(randomUUID()), { 'x402/payment': 'not a payment' });
    assert.equal(result.structuredContent.x402Version, 2);
    assert.equal(errorOf(result).code, 'payment_invalid');
  });

  test('unknown tool and bad arguments are tool errors with the REST error document, never a protocol failure', async () => {
    const unknown = errorOf(await call(agent, 'launch_rocket', {}));
    assert.equal(unknown.code, 'tool_not_found');
    assert.match(unknown.message, /tools\/list/);

    const missing = errorOf(await call(agent, 'order', { product_id: 'instant-stream', email: 'mcp@example.com' }));
    assert.equal(missing.code, 'invalid_request');
    assert.deepEqual(missing.details!.map((d) => d.pointer).sort(), ['/idempotency_key', '/station_name']);

    const wrongType = errorOf(await call(agent, 'order', { ...streamOrder(randomUUID()), parameters: 'loud' }));
    assert.equal(wrongType.code, 'invalid_request');
    assert.equal(wrongType.details![0].pointer, '/parameters');

    const outOfRange = errorOf(
      await call(agent, 'order', {
        ...streamOrder(randomUUID()),
        parameters: { duration_hours: 1, max_listeners: -5, bitrate_kbps: 64 },
      }),
    );
    assert.equal(outOfRange.details![0].pointer, '/parameters/max_listeners');

    assert.equal(
      errorOf(await call(agent, 'order', { ...streamOrder(randomUUID()), product_id: 'no-such-product' })).code,
      'product_not_found',
    );
    assert.equal(
      errorOf(await call(agent, 'service_status', { service_id: 'svc_doesnotexist' })).code,
      'service_not_found',
    );
    assert.equal(errorOf(await call(agent, 'service_status', {})).code, 'invalid_request');

    // The connection still works.
    assert.equal((await call(anonymous, 'list_products', {})).isError, undefined);
  });

  test('a JSON-RPC batch or a body that is no request object gets a JSON-RPC error saying what to send', async () => {
    const post = async (body: unknown) => {
      const response = await fetch(`${service.baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(body),
      });
      return {
        status: response.status,
        body: (await response.json()) as { jsonrpc: string; id: null; error: { code: number; message: string } },
      };
    };
    const batch = await post([
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    ]);
    assert.equal(batch.status, 400);
    assert.deepEqual([batch.body.jsonrpc, batch.body.id, batch.body.error.code], ['2.0', null, -32600]);
    assert.match(batch.body.error.message, /batches are not accepted.*a POST of its own/);
    const scalar = await post(42);
    assert.equal(scalar.status, 400);
    assert.match(scalar.body.error.message, /one JSON-RPC request object/);
  });
});
