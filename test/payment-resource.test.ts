import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { PaymentRequired } from '@x402/core/types';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader, TestWallet } from './support/wallet.js';
import { requireStreamingTools } from './support/system-tools.js';
import { buyerWallet } from './support/dev-file.js';

// A payment's signature covers only the transfer; the resource it was made out for (resource.url, which the payer's
// client shows and keeps) must be the operation it pays, or one payment could buy another thing of the same price.
requireStreamingTools();

let service: Service;
let wallet: TestWallet;
let agent: Client;

before(async () => {
  service = await startService();
  wallet = await buyerWallet(service);
  agent = new Client({ name: 'test-agent', version: '1.0.0' });
  await agent.connect(
    new StreamableHTTPClientTransport(new URL(`${service.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${service.apiKey}` } },
    }),
  );
});
after(async () => {
  await agent?.close();
  await service?.stop();
});

const stream = {
  product_id: 'instant-stream',
  email: 'bind@example.com',
  station_name: 'Bound FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};

/** A payment signed by the official client for these requirements, made out for `resourceUrl`. */
async function signedFor(required: PaymentRequired, resourceUrl: string) {
  return wallet.client.createPaymentPayload({
    ...structuredClone(required),
    resource: { ...required.resource, url: resourceUrl },
  });
}

describe('a payment is bound to the resource it was made out for', () => {
  test('REST: a payment made out for /orders does not pay an upgrade of the same price; nothing is charged', {
    timeout: 120_000,
  }, async () => {
    const bought = await buy(service, wallet, stream);
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const serviceId = bought.body.service.service_id;
    const path = `/services/${serviceId}/upgrade`;
    const key = randomUUID();
    const unpaid = await request(service, 'POST', path, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': key },
    });
    assert.equal(unpaid.status, 402);
    const required = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!);
    assert.match(required.resource.url, new RegExp(`/services/${serviceId}/upgrade$`));
    const ordersUrl = required.resource.url.replace(/\/services\/.*$/, '/orders');
    const { asset, payTo } = required.accepts[0];
    const before = await wallet.balanceOf(asset, wallet.address);
    const receivedBefore = await wallet.balanceOf(asset, payTo);

    // The payer signed for an order; someone replays it on an upgrade priced the same.
    const forOrders = await signedFor(required, ordersUrl);
    const refused = await request(service, 'POST', path, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': key, 'payment-signature': encodePaymentSignatureHeader(forOrders) },
    });
    assert.equal(refused.status, 402, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'payment_wrong_resource');
    assert.match(refused.body.error.message, /Nothing was charged/);
    assert.ok(refused.body.error.message.includes(required.resource.url), refused.body.error.message);
    assert.equal(
      decodePaymentRequiredHeader(refused.headers.get('payment-required')!).resource.url,
      required.resource.url,
    );
    assert.equal(await wallet.balanceOf(asset, wallet.address), before);
    assert.equal(await wallet.balanceOf(asset, payTo), receivedBefore);
    assert.doesNotMatch(
      String((await request(service, 'GET', `/services/${serviceId}`)).body.status_reason),
      /Upgraded/,
      'not upgraded',
    );

    // A payment made out for another service's upgrade, or for none, is refused the same way.
    const forOther = await signedFor(required, required.resource.url.replace(serviceId, 'svcsomeotherone'));
    const other = await request(service, 'POST', path, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': key, 'payment-signature': encodePaymentSignatureHeader(forOther) },
    });
    assert.equal(other.body.error.code, 'payment_wrong_resource');
    const { resource: _, ...bare } = await wallet.client.createPaymentPayload(required);
    const none = await request(service, 'POST', path, {
      body: { product_id: 'event-stream' },
      headers: { 'idempotency-key': key, 'payment-signature': encodePaymentSignatureHeader(bare as never) },
    });
    assert.equal(none.body.error.code, 'payment_wrong_resource');
    assert.match(none.body.error.message, /resource\.url is missing/);

    // Signed for the resource the 402 named, the same key goes through.
    const paid = await request(service, 'POST', path, {
      body: { product_id: 'event-stream' },
      headers: {
        'idempotency-key': key,
        'payment-signature': encodePaymentSignatureHeader(await wallet.client.createPaymentPayload(required)),
      },
    });
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(paid.body.order.upgrade_of, serviceId);
  });

  test('MCP: a payment made out for POST /orders does not pay the order tool; nothing is charged', {
    timeout: 120_000,
  }, async () => {
    const key = randomUUID();
    const unpaidRest = await request(service, 'POST', '/orders', {
      body: stream,
      headers: { 'idempotency-key': randomUUID() },
    });
    assert.equal(unpaidRest.status, 402);
    const restRequired = decodePaymentRequiredHeader(unpaidRest.headers.get('payment-required')!);
    const forRest = await wallet.client.createPaymentPayload(restRequired);
    const { asset, payTo } = restRequired.accepts[0];
    const before = await wallet.balanceOf(asset, wallet.address);
    const receivedBefore = await wallet.balanceOf(asset, payTo);

    const args = { idempotency_key: key, ...stream };
    const refused = (await agent.callTool({
      name: 'order',
      arguments: args,
      _meta: { 'x402/payment': forRest },
    })) as any;
    assert.equal(refused.isError, true);
    assert.equal(refused.structuredContent.resource.url, 'mcp://tool/order', 'the PaymentRequired names the tool');
    const document = JSON.parse(refused.content[1].text);
    assert.equal(document.error.code, 'payment_wrong_resource');
    assert.match(document.error.message, /mcp:\/\/tool\/order/);
    assert.equal(await wallet.balanceOf(asset, wallet.address), before);
    assert.equal(await wallet.balanceOf(asset, payTo), receivedBefore);

    // The tool's own requirements, signed as named, pay it.
    const paid = (await agent.callTool({
      name: 'order',
      arguments: args,
      _meta: { 'x402/payment': await wallet.client.createPaymentPayload(refused.structuredContent) },
    })) as any;
    assert.equal(paid.isError, undefined, JSON.stringify(paid));
    assert.equal(paid.structuredContent.order.status, 'active');
  });

  test('MCP: a payment made out for extend_service (or upgrade_service) of one service does not pay it for another', {
    timeout: 120_000,
  }, async () => {
    const [a, b] = [await buy(service, wallet, stream), await buy(service, wallet, stream)].map((r) => {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body.service as { service_id: string; expires_at: string; limits: Record<string, unknown> };
    });
    const call = (name: string, args: Record<string, unknown>, meta?: Record<string, unknown>) =>
      agent.callTool({ name, arguments: args, ...(meta && { _meta: meta }) }) as Promise<any>;
    const errorOf = (result: any) => {
      assert.equal(result.isError, true, JSON.stringify(result));
      return JSON.parse(result.content[1].text).error as { code: string; message: string };
    };

    for (const [tool, more] of [
      ['extend_service', { duration_hours: 2 }],
      ['upgrade_service', { product_id: 'event-stream' }],
    ] as const) {
      // The payer asks to change service A and signs what A's PaymentRequired names...
      const forA = (await call(tool, { service_id: a.service_id, idempotency_key: randomUUID(), ...more }))
        .structuredContent as PaymentRequired;
      const payment = await wallet.client.createPaymentPayload(forA);
      const { asset, payTo } = forA.accepts[0];
      const before = await wallet.balanceOf(asset, wallet.address);
      const receivedBefore = await wallet.balanceOf(asset, payTo);

      // ...and that payment is sent with a call for service B, at the same price.
      const argsB = { service_id: b.service_id, idempotency_key: randomUUID(), ...more };
      const refused = await call(tool, argsB, { 'x402/payment': payment });
      const error = errorOf(refused);
      assert.equal(error.code, 'payment_wrong_resource', `${tool}: ${JSON.stringify(refused)}`);
      assert.equal(
        forA.resource.url,
        `mcp://tool/${tool}?service_id=${a.service_id}`,
        'the resource names the service',
      );
      assert.ok(error.message.includes(`mcp://tool/${tool}?service_id=${a.service_id}`), error.message);
      assert.ok(error.message.includes(`mcp://tool/${tool}?service_id=${b.service_id}`), error.message);
      assert.equal(refused.structuredContent.resource.url, `mcp://tool/${tool}?service_id=${b.service_id}`);
      assert.equal(await wallet.balanceOf(asset, wallet.address), before, 'nothing charged');
      assert.equal(await wallet.balanceOf(asset, payTo), receivedBefore, 'nothing received');
      const bNow = (await call('service_status', { service_id: b.service_id })).structuredContent.service;
      assert.equal(bNow.expires_at, b.expires_at, 'B not extended');
      assert.deepEqual(bNow.limits, b.limits, 'B not changed');

      // Signed for B, as B's PaymentRequired names it, it goes through.
      const paid = await call(tool, argsB, {
        'x402/payment': await wallet.client.createPaymentPayload(refused.structuredContent),
      });
      assert.equal(paid.isError, undefined, JSON.stringify(paid));
      assert.equal(
        paid.structuredContent.order[tool === 'extend_service' ? 'extension_of' : 'upgrade_of'],
        b.service_id,
      );
      Object.assign(b, paid.structuredContent.service);
    }
  });
});
