import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buy } from './support/purchase.js';
import { copyCatalog, request, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { devFile, buyerWallet } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// The request-path caches must never answer with something the database or the catalog no longer says.
let service: Service;
let catalog: Awaited<ReturnType<typeof copyCatalog>>;
let wallet: TestWallet;
const productFile = () => join(catalog.catalogDir, 'products/instant-stream.yaml');

before(async () => {
  catalog = await copyCatalog();
  const settings = join(catalog.catalogDir, 'catalog.yaml');
  const text = await readFile(settings, 'utf8');
  const limited = text.replace(/per_key: \{[^}]*\}/, 'per_key: { live_services: 2, listener_places: 10 }');
  assert.notEqual(limited, text, 'the shipped catalog sets buyer_limits');
  await writeFile(settings, limited);
  service = await startService({ CATALOG_DIR: catalog.catalogDir, RULES_DIR: catalog.rulesDir });
  wallet = await buyerWallet(service);
});
after(async () => {
  await service?.stop();
  await catalog?.remove();
});

const order = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Memo FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};
let keys = 0;
const newKey = () => `perf-caches-${process.pid}-${keys++}`;
const ask = (agent: Pick<Service, 'baseUrl' | 'apiKey'>) =>
  request(agent, 'POST', '/orders', { body: order, headers: { 'idempotency-key': newKey() } });
const askedAmount = async () => {
  const answer = await ask(service);
  assert.equal(answer.status, 402, JSON.stringify(answer.body));
  return decodePaymentRequiredHeader(answer.headers.get('payment-required')!).accepts[0].amount;
};
async function newAgent(): Promise<Pick<Service, 'baseUrl' | 'apiKey'>> {
  const created = await service.cli(['keys', 'create', '--name', `agent-${keys++}`]);
  return { baseUrl: service.baseUrl, apiKey: JSON.parse(created.stdout).api_key };
}

describe('request-path caches', () => {
  test('the memoized 402 follows a catalog reload: a price edit shows in the next 402', async () => {
    const hash = async () =>
      (await request(service, 'GET', '/health', { auth: false })).body.catalog.content_hash as string;
    const servedHash = await hash();
    const before = await askedAmount();
    assert.equal(await askedAmount(), before, 'the same request asks the same amount');
    const text = await readFile(productFile(), 'utf8');
    // Within the order limits at both ends: base 0.26 instead of 0.25, 0.019 an hour instead of 0.02.
    const edited = text
      .replace('base_atomic: "250000"', 'base_atomic: "260000"')
      .replace('per_hour_atomic: "20000"', 'per_hour_atomic: "19000"')
      .replace('duration_hours x 0.02 USDC', 'duration_hours x 0.019 USDC');
    assert.notEqual(edited, text);
    await writeFile(productFile(), edited);
    // Reloaded once the served content hash changes (bounded: reloads converge within seconds).
    const started = Date.now();
    while ((await hash()) === servedHash) {
      assert.ok(
        Date.now() - started < 30_000,
        `the edit was not served within 30 s: ${JSON.stringify((await request(service, 'GET', '/health', { auth: false })).body.catalog)}`,
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(
      BigInt(await askedAmount()),
      BigInt(before) + 9000n,
      'the 402 asks the edited price (one hour: +0.01 base, -0.001 per hour) at once',
    );
    await writeFile(productFile(), text);
  });

  test('a key that reached its limit is refused before payment at once, even right after a 402 passed it', async () => {
    const agent = await newAgent();
    assert.equal((await buy(agent, wallet, order, newKey())).status, 200);
    // While the second one is bought, unpaid asks keep a passed check less than a second old in the memo.
    let buying = true;
    const asking = (async () => {
      while (buying) {
        // 402 while one service is held, 429 once the second order is claimed (it counts while in flight).
        const status = (await ask(agent)).status;
        assert.ok(status === 402 || status === 429, `unpaid ask answered ${status}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const bought = await buy(agent, wallet, order, newKey());
    buying = false;
    await asking;
    assert.equal(bought.status, 200, JSON.stringify(bought.body));
    const refused = await ask(agent);
    assert.equal(refused.status, 429, `the third order is refused before payment: ${JSON.stringify(refused.body)}`);
    assert.equal(refused.body.error.code, 'per_key_limit_reached');
    assert.equal(refused.headers.get('payment-required'), null);
  });
});

describe('authentication cache', () => {
  test('a key revoked through one instance is refused by another that cached it, within a bound', async () => {
    const lock = await serveLock(service);
    const dev = await devFile(service);
    const second = await startService({
      DATABASE_URL: lock.database_url,
      CHAIN_RPC_URL: dev.chain.rpc_url,
      DEV_FACILITATOR_ACCOUNT: '4',
      CATALOG_DIR: catalog.catalogDir,
      RULES_DIR: catalog.rulesDir,
    });
    try {
      const created = JSON.parse((await service.cli(['keys', 'create', '--name', 'cached'])).stdout);
      const agent = { baseUrl: second.baseUrl, apiKey: created.api_key };
      // A read authenticates without writing: the second instance now holds the key in memory.
      for (let i = 0; i < 3; i++) assert.equal((await request(agent, 'GET', '/orders/ra_notanorder000')).status, 404);
      assert.equal((await service.cli(['keys', 'revoke', created.id])).code, 0);
      const boundMs = 5000; // PostgreSQL delivers the notification at commit; the slack is for a loaded machine
      const started = Date.now();
      let status = 0;
      while (
        (status = (await request(agent, 'GET', '/orders/ra_notanorder000')).status) !== 401 &&
        Date.now() - started < boundMs
      ) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(status, 401, `the revoked key is still accepted by the other instance after ${boundMs} ms`);
      assert.equal(
        (await request(agent, 'POST', '/orders', { body: order, headers: { 'idempotency-key': newKey() } })).status,
        401,
        'and writes refuse it too',
      );
    } finally {
      await second.stop();
    }
  });
});
