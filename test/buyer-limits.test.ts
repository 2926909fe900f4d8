import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { cli, copyCatalog, request, startService, type JsonResponse, type Service } from './support/service.js';
import { buy } from './support/purchase.js';
import { shortLivedCatalog } from './support/short-catalog.js';
import { waitFor } from './support/streaming.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile } from './support/dev-file.js';

// One key may hold 2 live services and 10 listener places, one paying address 4 services: a buyer cannot take
// every stream of the deployment (which itself has room for far more).
let service: Service;
let catalog: Awaited<ReturnType<typeof shortLivedCatalog>>;
let wallet: TestWallet;
let payer: string;
let asset: string;

before(async () => {
  catalog = await shortLivedCatalog();
  const settings = join(catalog.catalogDir, 'catalog.yaml');
  const text = await readFile(settings, 'utf8');
  const limited = text
    .replace(/per_key: \{[^}]*\}/, 'per_key: { live_services: 2, listener_places: 10 }')
    .replace(/per_payer: \{[^}]*\}/, 'per_payer: { live_services: 4, listener_places: 100 }');
  assert.notEqual(limited, text, 'the shipped catalog sets buyer_limits');
  await writeFile(settings, limited);
  service = await startService({ CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir });
  const dev = await devFile(service);
  wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
  payer = dev.buyer.address;
});
after(async () => {
  await service?.stop();
  await catalog?.remove();
});

const order = (maxListeners: number, hours = 1) => ({
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Fair FM',
  parameters: { duration_hours: hours, max_listeners: maxListeners, bitrate_kbps: 64 },
});
let keys = 0;
const newKey = () => `limits-${process.pid}-${keys++}`;
async function newAgent(): Promise<Service> {
  const created = await service.cli(['keys', 'create', '--name', `agent-${keys++}`]);
  return { ...service, apiKey: JSON.parse(created.stdout).api_key };
}
const post = (agent: Service, body: unknown, key: string, signature?: string) =>
  request(agent, 'POST', '/orders', {
    body,
    headers: { 'idempotency-key': key, ...(signature && { 'payment-signature': signature }) },
  });
const balance = async () => {
  asset ??= decodePaymentRequiredHeader(
    (await post(await newAgent(), order(1), newKey())).headers.get('payment-required')!,
  ).accepts[0].asset;
  return wallet.balanceOf(asset, payer);
};

function assertRefused(response: JsonResponse, code: string, pattern: RegExp) {
  assert.equal(response.status, 429, JSON.stringify(response.body));
  assert.equal(response.body.ok, false);
  assert.equal(response.body.error.code, code);
  assert.match(response.body.error.message, pattern);
  assert.match(response.body.error.message, /Nothing was charged/);
  assert.ok(response.body.error.details.in_use, 'says what is in use');
  assert.equal(response.headers.get('payment-required'), null, 'no payment is asked for a refused order');
}

describe('per-key and per-payer limits', () => {
  test('/availability tells agents the limits', async () => {
    const availability = await request(service, 'GET', '/availability', { auth: false });
    assert.deepEqual(availability.body.agent_checkout.buyer_limits, {
      per_key: { live_services: 2, listener_places: 10 },
      per_payer: { live_services: 4, listener_places: 100 },
    });
  });

  test('an expired service gives its place back to the key', { timeout: 120_000 }, async () => {
    const agent = await newAgent();
    const brief = order(1, 0.002);
    for (let i = 0; i < 2; i++) {
      const bought = await buy(agent, wallet, brief, newKey());
      assert.equal(bought.status, 200, JSON.stringify(bought.body));
    }
    const refused = await post(agent, brief, newKey());
    assertRefused(
      refused,
      'per_key_limit_reached',
      /already holds 2 live services, the most one key may hold at once \(2\)/,
    );
    const wait = Number(refused.headers.get('retry-after'));
    assert.ok(wait >= 1 && wait <= 10, `Retry-After ${wait} is when the first service ends`);
    assert.equal(refused.body.error.retryable, true);
    // Refused until the first service ends; then the next order is asked to pay.
    await waitFor(
      'the expired services to no longer count',
      async () => {
        const answer = await post(agent, brief, newKey());
        if (answer.status === 402) return true;
        assertRefused(answer, 'per_key_limit_reached', /already holds 2 live services/);
        await sleep(200);
        return false;
      },
      wait * 1000 + 10_000,
    );
  });

  test('the order over the key limit is refused before payment, and nothing is charged', async () => {
    const agent = await newAgent();
    for (let i = 0; i < 2; i++) assert.equal((await buy(agent, wallet, order(2), newKey())).status, 200);
    const before = await balance();
    const refused = await buy(agent, wallet, order(2), newKey());
    assertRefused({ ...refused, body: refused.body }, 'per_key_limit_reached', /already holds 2 live services/);
    assert.deepEqual(refused.body.error.details.in_use.key, { live_services: 2, listener_places: 4 });
    assert.equal(await balance(), before, 'nothing was charged');
  });

  test('listener places: an order that takes a key over its places is refused, a smaller one is offered', async () => {
    const agent = await newAgent();
    assertRefused(
      await post(agent, order(11), newKey()),
      'per_key_limit_reached',
      /the 11 asked would take it over the 10 one key may hold/,
    );
    assert.equal((await post(agent, order(10), newKey())).status, 402);
  });

  test('two parallel paid orders for the last place of a key: exactly one goes through, the other is not charged', async () => {
    const agent = await newAgent();
    assert.equal((await buy(agent, wallet, order(1), newKey())).status, 200);
    const attempts = await Promise.all(
      [newKey(), newKey()].map(async (key) => {
        const required = (await post(agent, order(1), key)).headers.get('payment-required');
        assert.ok(required, 'the last place is still offered');
        return { key, signature: await wallet.pay(required) };
      }),
    );
    const before = await balance();
    const answers = await Promise.all(attempts.map((a) => post(agent, order(1), a.key, a.signature)));
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 429], JSON.stringify(answers.map((a) => a.body)));
    assertRefused(answers.find((a) => a.status === 429)!, 'per_key_limit_reached', /already holds 2 live services/);
    assert.equal(
      before - (await balance()),
      BigInt(answers.find((a) => a.status === 200)!.body.order.amount.amount_atomic),
    );
  });

  test('the paying address has its own limit across keys: the paid order is refused and not charged', async () => {
    // This payer now holds 4 live services (2 + 2 above); a fresh key may still ask, but not pay from this address:
    // refused once the payment is verified, before it is settled.
    const agent = await newAgent();
    const key = newKey();
    const required = (await post(agent, order(1), key)).headers.get('payment-required');
    assert.ok(required, 'the key itself is under its limit');
    const before = await balance();
    const refused = await post(agent, order(1), key, await wallet.pay(required));
    assertRefused(
      refused,
      'per_payer_limit_reached',
      new RegExp(
        `${payer.toLowerCase()} already pays for 4 live services, the most one address may hold at once \\(4\\)`,
      ),
    );
    assert.deepEqual(refused.body.error.details.in_use.payer, { live_services: 4, listener_places: 6 });
    assert.equal(await balance(), before, 'nothing was charged');
  });
});

describe('buyer limits in the catalog', () => {
  test('a wrong limit is reported with file, line and column', async () => {
    const copy = await copyCatalog();
    try {
      const file = join(copy.catalogDir, 'catalog.yaml');
      const text = await readFile(file, 'utf8');
      const line = text.split('\n').findIndex((l) => l.includes('per_payer:')) + 1;
      assert.ok(line > 0);
      await writeFile(
        file,
        text
          .replace(/per_payer: \{ live_services: \d+/, 'per_payer: { live_services: -1')
          .replace('per_key: {', 'per_key: { listeners: 5,'),
      );
      const result = await cli(['catalog', 'check'], { CATALOG_DIR: copy.catalogDir, RULES_DIR: copy.rulesDir });
      assert.equal(result.code, 1);
      assert.match(result.stderr, new RegExp(`^catalog/catalog\\.yaml:${line}:\\d+: must be >= 0$`, 'm'));
      assert.match(
        result.stderr,
        new RegExp(`^catalog/catalog\\.yaml:${line - 1}:\\d+: listeners is not allowed here$`, 'm'),
      );
    } finally {
      await copy.remove();
    }
  });
});
