import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { part } from '../src/http/openapi-parts/identity.js';
import { createAjv } from '../src/schema/ajv.js';
import { buy } from './support/purchase.js';
import { request, startService, type Service } from './support/service.js';
import { challengeOf, signedHeader, signingInFetch } from './support/siwx.js';
import { waitFor } from './support/streaming.js';
import { TestWallet } from './support/wallet.js';
import { devFile, type DevFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// A: the service agents talk to. B: a second instance on the same PostgreSQL behind the same public address (as behind
// a load balancer), with short challenges (to see them expire) and self-service sign-up turned off.
let a: Service;
let b: Service;
let dev: DevFile;
// Short enough to wait for, long enough for a loaded machine to answer B in time (B checks A's challenges' age by it).
const CHALLENGE_SECONDS_B = 6;
/** Challenges from B issued at the start and checked at the end, so they expire while the other tests run. */
let aging: { wallet: PrivateKeyAccount; asIssued: string; kept: ReturnType<typeof challengeOf> };

before(async () => {
  a = await startService({
    AGENT_SIGNUP_KEYS_PER_WALLET_PER_HOUR: '3',
    AGENT_SIGNUP_LIVE_KEYS_PER_WALLET: '2',
    AGENT_SIGNUP_KEYS_PER_IP_PER_HOUR: '9',
  });
  const lock = await serveLock(a);
  dev = await devFile(a);
  b = await startService({
    DATABASE_URL: lock.database_url,
    CHAIN_RPC_URL: dev.chain.rpc_url,
    DEV_FACILITATOR_ACCOUNT: '4',
    PUBLIC_BASE_URL: new URL(a.baseUrl).origin,
    SIWX_CHALLENGE_SECONDS: String(CHALLENGE_SECONDS_B),
    AGENT_SIGNUP: 'off',
  });
  const wallet = newWallet();
  const asIssued = await signIn(b, wallet);
  aging = { wallet, asIssued, kept: challengeOf(await request(anonymous(b), 'GET', '/keys', { auth: false })) };
});
after(async () => {
  await b?.stop();
  await a?.stop();
});

/** Validates a response body against a schema of the identity OpenAPI part (Service stands in as any object here). */
const described = (() => {
  const ajv = createAjv();
  ajv.addKeyword('components'); // the part's schemas refer to each other as in the OpenAPI document
  const doc = { $id: 'doc', components: { schemas: { ...part.schemas, Service: { type: 'object' } } } };
  assert.ok(ajv.validateSchema(doc), ajv.errorsText(ajv.errors)); // against the 2020-12 meta-schema
  ajv.addSchema(doc);
  return (name: string, body: unknown) => {
    const validate = ajv.getSchema(`doc#/components/schemas/${name}`)!;
    assert.ok(validate(body), `${name}: ${JSON.stringify(validate.errors)}`);
  };
})();

async function rpc(method: string, params: unknown[]): Promise<unknown> {
  const answer = await fetch(dev.chain.rpc_url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await answer.json()) as { result?: unknown; error?: unknown };
  if (body.error) throw new Error(JSON.stringify(body.error));
  return body.result;
}

const newWallet = () => privateKeyToAccount(generatePrivateKey());
const anonymous = (service: Service) => ({ baseUrl: service.baseUrl, apiKey: '' });

/** A fresh challenge from `service` for `method` `path` (a request with no credentials), signed by `account`. */
async function signIn(
  service: Service,
  account: PrivateKeyAccount,
  options: Parameters<typeof signedHeader>[2] = {},
  path = '/keys',
  method = 'GET',
): Promise<string> {
  const asked = await request(anonymous(service), method, path, { auth: false });
  assert.equal(asked.status, 402, JSON.stringify(asked.body));
  return signedHeader(challengeOf(asked), account, options);
}

async function postKey(account: PrivateKeyAccount, name?: string) {
  const response = await signingInFetch(account)(`${a.baseUrl}/keys`, {
    method: 'POST',
    ...(name && { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name }) }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as any };
}

describe('wallet sign-in (SIWX)', () => {
  test('a request with no credentials gets the sign-in challenge: 402, nothing to pay, bound to this service and chain', async () => {
    const asked = await request(anonymous(a), 'POST', '/keys', { auth: false });
    assert.equal(asked.status, 402);
    assert.equal(asked.body.error.code, 'authentication_required');
    assert.match(asked.body.error.message, /SIGN-IN-WITH-X/);
    const required = JSON.parse(Buffer.from(asked.headers.get('payment-required')!, 'base64').toString('utf8'));
    // One entry that names the chain (x402 clients read it there) and cannot be paid.
    assert.deepEqual(
      required.accepts.map((x: any) => [x.scheme, x.network, x.amount]),
      [['sign-in-with-x', 'eip155:8453', '0']],
    );
    const { info, supportedChains } = required.extensions['sign-in-with-x'];
    assert.equal(info.domain, new URL(a.baseUrl).host);
    assert.equal(info.uri, `${a.baseUrl}/keys`);
    assert.match(info.nonce, /^[0-9a-f]{32}$/);
    assert.ok(Date.parse(info.expirationTime) - Date.parse(info.issuedAt) <= 300_000);
    assert.deepEqual(supportedChains, [{ chainId: 'eip155:8453', type: 'eip191' }]);
    const again = challengeOf(await request(anonymous(a), 'GET', '/keys', { auth: false }));
    assert.notEqual(again.info.nonce, info.nonce, 'a new nonce for every challenge');
  });

  test('a wallet gets an API key with the official client hook and quotes with it', async () => {
    const wallet = newWallet();
    const got = await postKey(wallet, 'my agent');
    assert.equal(got.status, 201, JSON.stringify(got.body));
    assert.match(got.body.api_key, /^aak_[0-9a-f]{16}_/);
    assert.equal(got.body.key.name, 'my agent');
    assert.equal(got.body.key.wallet_address, wallet.address.toLowerCase());
    described('KeyIssued', got.body);
    const quoted = await request({ baseUrl: a.baseUrl, apiKey: got.body.api_key }, 'POST', '/quotes', {
      body: { product_id: 'instant-stream', parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 } },
    });
    assert.equal(quoted.status, 200, JSON.stringify(quoted.body));
    // Only the hash is stored: the token is nowhere in the keys table.
    const listed = await signingInFetch(wallet)(`${a.baseUrl}/keys`).then((r) => r.json() as any);
    assert.equal(listed.keys.length, 1);
    described('WalletKeys', listed);
    // The secret is all after the key id (it may itself contain '_', base64url).
    const secret = got.body.api_key.slice('aak_0123456789abcdef_'.length);
    assert.ok(secret.length >= 20);
    assert.equal(JSON.stringify(listed).includes(secret), false);
  });

  test('a signed message is accepted once: the replay is refused with 401 siwx_nonce_used', async () => {
    const wallet = newWallet();
    const header = await signIn(a, wallet);
    const first = await request(anonymous(a), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': header } });
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.wallet_address, wallet.address.toLowerCase());
    const replay = await request(anonymous(a), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': header } });
    assert.equal(replay.status, 401);
    assert.equal(replay.body.error.code, 'siwx_nonce_used');
    assert.match(replay.body.error.message, /fresh challenge/);
  });

  test('a message for another domain, a signature by another wallet, a made-up nonce or garbage: 401 siwx_invalid', async () => {
    const wallet = newWallet();
    const other = newWallet();
    const cases = {
      'another domain': await signIn(a, wallet, { change: { domain: 'evil.example' } }),
      'another origin': await signIn(a, wallet, { change: { uri: 'https://evil.example/api/v1/keys' } }),
      'another wallet signed': await signIn(a, other, {
        after: (p) => {
          p.address = wallet.address;
        },
      }),
      'nonce not issued here': await signIn(a, wallet, { change: { nonce: 'a'.repeat(32) } }),
      'another chain': await signIn(a, wallet, {
        after: (p) => {
          p.chainId = 'eip155:1';
        },
      }),
      'not base64 JSON': '%%%not-a-header',
    };
    for (const [name, header] of Object.entries(cases)) {
      const answer = await request(anonymous(a), 'GET', '/keys', {
        auth: false,
        headers: { 'sign-in-with-x': header },
      });
      assert.equal(answer.status, 401, `${name}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'siwx_invalid', name);
    }
    // The refused attempts did not use up the wallet's own challenge: signed properly, a new one works.
    assert.equal(
      (
        await request(anonymous(a), 'GET', '/keys', {
          auth: false,
          headers: { 'sign-in-with-x': await signIn(a, wallet) },
        })
      ).status,
      200,
    );
  });

  test('a smart-contract wallet (EIP-1271) signs in: its signature is checked on chain', async () => {
    // A contract wallet whose isValidSignature accepts any signature (returns the EIP-1271 magic value 0x1626ba7e).
    const contract = privateKeyToAccount(generatePrivateKey()).address;
    await rpc('anvil_setCode', [contract, '0x631626ba7e60e01b60005260206000f3']);
    const someKey = newWallet();
    const header = await signIn(a, someKey, {
      after: (p) => {
        p.address = contract;
      },
    });
    const answer = await request(anonymous(a), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': header } });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.wallet_address, contract.toLowerCase());
  });

  test('two instances on one database: a nonce used on one is refused on the other', async () => {
    const wallet = newWallet();
    const header = await signIn(a, wallet);
    assert.equal(
      (await request(anonymous(b), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': header } })).status,
      200,
      'B accepts a challenge A issued',
    );
    const replay = await request(anonymous(a), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': header } });
    assert.equal(replay.status, 401);
    assert.equal(replay.body.error.code, 'siwx_nonce_used');
    const second = await signIn(a, wallet);
    assert.equal(
      (await request(anonymous(a), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': second } })).status,
      200,
    );
    assert.equal(
      (await request(anonymous(b), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': second } })).body.error
        ?.code,
      'siwx_nonce_used',
    );
    // Sent 10 times at once to both instances: accepted exactly once.
    const raced = await signIn(a, wallet);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        request(anonymous(i % 2 ? a : b), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': raced } }),
      ),
    );
    assert.equal(answers.filter((r) => r.status === 200).length, 1);
    assert.deepEqual(
      new Set(answers.filter((r) => r.status !== 200).map((r) => r.body.error.code)),
      new Set(['siwx_nonce_used']),
    );
  });
});

describe('self-service keys', () => {
  test("list and revoke own keys, not another wallet's; a revoked key stops working", async () => {
    const wallet = newWallet();
    const stranger = newWallet();
    const first = (await postKey(wallet, 'one')).body;
    const second = (await postKey(wallet, 'two')).body;
    const theirs = (await postKey(stranger)).body;
    const mine = (await (await signingInFetch(wallet)(`${a.baseUrl}/keys`)).json()) as any;
    assert.deepEqual(
      mine.keys.map((k: any) => k.name),
      ['one', 'two'],
    );
    assert.ok(mine.keys.every((k: any) => k.revoked_at === null && !('secret_hash' in k)));

    const notMine = await signingInFetch(wallet)(`${a.baseUrl}/keys/${theirs.key.id}`, { method: 'DELETE' });
    assert.equal(notMine.status, 404);
    assert.equal(((await notMine.json()) as any).error.code, 'key_not_found');
    const quote = {
      product_id: 'instant-stream',
      parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 },
    };
    assert.equal(
      (await request({ baseUrl: a.baseUrl, apiKey: theirs.api_key }, 'POST', '/quotes', { body: quote })).status,
      200,
      'their key still works',
    );

    const revoked = await signingInFetch(wallet)(`${a.baseUrl}/keys/${first.key.id}`, { method: 'DELETE' });
    assert.equal(revoked.status, 200);
    described('KeyRevoked', await revoked.json());
    assert.equal(
      (await request({ baseUrl: a.baseUrl, apiKey: first.api_key }, 'POST', '/quotes', { body: quote })).status,
      401,
    );
    assert.equal(
      (await request({ baseUrl: a.baseUrl, apiKey: second.api_key }, 'POST', '/quotes', { body: quote })).status,
      200,
    );
    const after = (await (await signingInFetch(wallet)(`${a.baseUrl}/keys`)).json()) as any;
    assert.ok(after.keys.find((k: any) => k.id === first.key.id).revoked_at);
  });

  test('limits per wallet: live keys (409) and keys per hour (429 with Retry-After)', async () => {
    const wallet = newWallet();
    const one = (await postKey(wallet)).body;
    assert.equal((await postKey(wallet)).status, 201);
    const third = await postKey(wallet);
    assert.equal(third.status, 409, JSON.stringify(third.body));
    assert.equal(third.body.error.code, 'key_limit_reached');
    assert.equal((await signingInFetch(wallet)(`${a.baseUrl}/keys/${one.key.id}`, { method: 'DELETE' })).status, 200);
    assert.equal((await postKey(wallet)).status, 201, 'room again after a revocation');
    assert.equal(
      (await signingInFetch(wallet)(`${a.baseUrl}/keys/${one.key.id}`, { method: 'DELETE' })).status,
      404,
      'already revoked',
    );
    const fourth = await postKey(wallet);
    assert.equal(fourth.status, 429, JSON.stringify(fourth.body));
    assert.equal(fourth.body.error.code, 'signup_rate_limited');
    assert.equal(fourth.body.error.retryable, true);
    const wait = Number(fourth.headers.get('retry-after'));
    assert.ok(wait > 3000 && wait <= 3600, `Retry-After ${wait}`);
  });

  test('AGENT_SIGNUP=off: 403 agent_signup_disabled', async () => {
    const refused = await request(anonymous(b), 'POST', '/keys', { auth: false });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'agent_signup_disabled');
    assert.match(refused.body.error.message, /operator/);
  });
});

describe('a wallet that paid reaches its services with no key', () => {
  let bought: any;
  let payerKey: string;
  const buyer = () => privateKeyToAccount(dev.buyer.private_key);

  before(async () => {
    // The buyer's wallet gets a key by signing in and buys with it: its services are then reachable both ways.
    payerKey = (await postKey(buyer(), 'buyer')).body.api_key;
    const wallet = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const order = await buy({ baseUrl: a.baseUrl, apiKey: payerKey }, wallet, {
      product_id: 'instant-stream',
      email: 'agent@example.com',
      station_name: 'Wallet FM',
      parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
    });
    assert.equal(order.status, 200, JSON.stringify(order.body));
    bought = order.body;
  });

  test('status, usage and the list by SIWX; by the key too; another wallet gets 404', async () => {
    const id = bought.service.service_id;
    const signedIn = signingInFetch(buyer());
    const status = await signedIn(`${a.baseUrl}/services/${id}`);
    assert.equal(status.status, 200);
    assert.equal(((await status.json()) as any).service.service_id, id);
    const usage = await signedIn(`${a.baseUrl}/services/${id}/usage`);
    assert.equal(usage.status, 200);
    assert.equal(((await usage.json()) as any).usage.service_id, id);
    const listed = (await (await signedIn(`${a.baseUrl}/services`)).json()) as any;
    assert.deepEqual(
      listed.services.map((s: any) => s.service_id),
      [id],
    );
    described('ServiceList', listed);

    assert.equal(
      (await request({ baseUrl: a.baseUrl, apiKey: payerKey }, 'GET', `/services/${id}`)).status,
      200,
      'the wallet-bound key too',
    );
    const byKey = await request({ baseUrl: a.baseUrl, apiKey: payerKey }, 'GET', '/services');
    assert.deepEqual(
      byKey.body.services.map((s: any) => s.service_id),
      [id],
    );

    const stranger = signingInFetch(newWallet());
    for (const path of [`/services/${id}`, `/services/${id}/usage`]) {
      const answer = await stranger(`${a.baseUrl}${path}`);
      assert.equal(answer.status, 404, path);
      assert.equal(((await answer.json()) as any).error.code, 'service_not_found');
    }
    assert.deepEqual(((await (await stranger(`${a.baseUrl}/services`)).json()) as any).services, []);
  });

  test('an upgrade paid by the wallet, signed in with no key: SIWX and PAYMENT-SIGNATURE on the same request', async () => {
    const id = bought.service.service_id;
    const path = `/services/${id}/upgrade`;
    const body = { product_id: 'event-stream' };
    const headers = { 'idempotency-key': `wallet-upgrade-${Date.now()}` };
    const unpaid = await request(anonymous(a), 'POST', path, {
      auth: false,
      body,
      headers: { ...headers, 'sign-in-with-x': await signIn(a, buyer(), {}, path, 'POST') },
    });
    assert.equal(unpaid.status, 402, JSON.stringify(unpaid.body));
    assert.equal(unpaid.body.error.code, 'payment_required');
    const payment = await new TestWallet(dev.buyer.private_key, dev.chain.rpc_url).pay(
      unpaid.headers.get('payment-required')!,
    );
    const paid = await request(anonymous(a), 'POST', path, {
      auth: false,
      body,
      headers: {
        ...headers,
        'sign-in-with-x': await signIn(a, buyer(), {}, path, 'POST'),
        'payment-signature': payment,
      },
    });
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
    assert.equal(paid.body.order.upgrade_of, id);
    assert.equal(paid.body.order.product_id, 'event-stream');
  });

  test('with neither key nor sign-in: the 402 challenge; with a bad key: 401 as before', async () => {
    const id = bought.service.service_id;
    const bare = await request(anonymous(a), 'GET', `/services/${id}`, { auth: false });
    assert.equal(bare.status, 402);
    assert.equal(challengeOf(bare).info.uri, `${a.baseUrl}/services/${id}`);
    const badKey = await request(
      { baseUrl: a.baseUrl, apiKey: `aak_0000000000000000_${'x'.repeat(43)}` },
      'GET',
      `/services/${id}`,
    );
    assert.equal(badKey.status, 401);
    assert.equal(badKey.body.error.code, 'invalid_api_key');
  });

  test('an id that cannot exist gets 404 with no challenge (a challenge names the URL: a made-up 5,000-character id made its header too large for clients)', async () => {
    const long = 'a'.repeat(5000);
    const service = await request(anonymous(a), 'GET', `/services/${long}/usage`, { auth: false });
    assert.equal(service.status, 404);
    assert.equal(service.body.error.code, 'service_not_found');
    assert.equal(service.headers.get('payment-required'), null);
    const key = await request(anonymous(a), 'DELETE', `/keys/${long}`, { auth: false });
    assert.equal(key.status, 404);
    assert.equal(key.body.error.code, 'key_not_found');
  });
});

// Last: it uses up this client address's sign-ups for the hour.
describe('self-service keys per client address', () => {
  test('limit per client address, whatever the wallets (429)', async () => {
    let refused: any;
    for (let i = 0; i < 10 && !refused; i++) {
      const got = await postKey(newWallet());
      if (got.status !== 201) refused = got;
    }
    assert.ok(refused, 'refused within 10 new wallets');
    assert.equal(refused.status, 429, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'signup_rate_limited');
    assert.match(refused.body.error.message, /Your address got 9 keys/);
    assert.ok(Number(refused.headers.get('retry-after')) > 0);
  });
});

// Last: the challenges issued at the start have aged during the other tests.
describe('wallet sign-in (SIWX): challenges kept past their expiry', () => {
  test('expired messages are refused with 401 siwx_expired, also when the client signs a later expiry than issued', async () => {
    const { wallet, asIssued, kept } = aging;
    // The tests above ran while the challenges aged; what is left of their time is waited for here.
    const expiry = Date.parse(kept.info.expirationTime!);
    await waitFor('the challenges to expire', () => Date.now() > expiry, (CHALLENGE_SECONDS_B + 1) * 1000);
    // A client that kept a challenge past its expiry and signs it now, with times of its own: the nonce has expired.
    const stretched = await signedHeader(kept, wallet, {
      change: { issuedAt: new Date().toISOString(), expirationTime: new Date(Date.now() + 3_600_000).toISOString() },
    });
    for (const header of [asIssued, stretched]) {
      const late = await request(anonymous(b), 'GET', '/keys', { auth: false, headers: { 'sign-in-with-x': header } });
      assert.equal(late.status, 401, JSON.stringify(late.body));
      assert.equal(late.body.error.code, 'siwx_expired');
    }
  });
});
