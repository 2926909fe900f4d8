import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import {
  decodePaymentRequiredHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader,
} from '@x402/core/http';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { createSIWxClientHook, wrapFetchWithSIWx } from '@x402/extensions/sign-in-with-x';
import { wrapFetchWithPayment } from '@x402/fetch';
import pg from 'pg';
import { encodeFunctionData, parseAbi, serializeErc6492Signature, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { startCountingRpc } from './support/rpc-proxy.js';
import { request, startService, type Service } from './support/service.js';
import { challengeOf, signedHeader } from './support/siwx.js';
import { TestWallet } from './support/wallet.js';
import { devFile, type DevFile } from './support/dev-file.js';
import { serveLock } from './support/serve-lock.js';

// A owns the chain and the database. C, the service under test, shares both and reaches the chain only through a
// proxy that counts every RPC call it makes.
let a: Service;
let c: Service;
let proxy: Awaited<ReturnType<typeof startCountingRpc>>;
let dev: DevFile;
let databaseUrl: string;

before(async () => {
  a = await startService();
  databaseUrl = (await serveLock(a)).database_url;
  dev = await devFile(a);
  proxy = await startCountingRpc(dev.chain.rpc_url);
  c = await startService({ DATABASE_URL: databaseUrl, CHAIN_RPC_URL: proxy.url, DEV_FACILITATOR_ACCOUNT: '5' });
});
after(async () => {
  await c?.stop();
  await proxy?.close();
  await a?.stop();
});

const authorizationState = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
]);
const anonymous = () => ({ baseUrl: c.baseUrl, apiKey: '' });
const newWallet = () => privateKeyToAccount(generatePrivateKey());

/** The RPC calls C made while `work` ran, by method. */
async function rpcDuring(work: () => Promise<void>): Promise<Record<string, number>> {
  const start = new Map(proxy.calls);
  await work();
  const spent: Record<string, number> = {};
  for (const [method, count] of proxy.calls)
    if (count > (start.get(method) ?? 0)) spent[method] = count - (start.get(method) ?? 0);
  return spent;
}

const total = (spent: Record<string, number>) => Object.values(spent).reduce((x, y) => x + y, 0);

async function chainRpc(method: string, params: unknown[]): Promise<unknown> {
  const answer = await fetch(dev.chain.rpc_url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await answer.json()) as { result?: unknown }).result;
}

/** A fresh challenge of C for this method and path, signed by `account` (`options` as signedHeader's). */
async function signIn(
  account: PrivateKeyAccount,
  path = '/keys',
  method = 'GET',
  options: Parameters<typeof signedHeader>[2] = {},
): Promise<string> {
  const asked = await request(anonymous(), method, path, { auth: false });
  assert.equal(asked.status, 402, JSON.stringify(asked.body));
  return signedHeader(challengeOf(asked), account, options);
}

function send(header: string, path = '/keys', method = 'GET') {
  return request(anonymous(), method, path, { auth: false, headers: { 'sign-in-with-x': header } });
}

/** A contract at a fresh address with this runtime code. */
async function contractWallet(code: Hex): Promise<`0x${string}`> {
  const address = newWallet().address;
  await chainRpc('anvil_setCode', [address, code]);
  return address;
}

describe('unauthenticated requests do not make the service query the chain', () => {
  test('forged SIGN-IN-WITH-X: 200 with a made-up nonce cost no RPC call; 50 by a plain wallet cost one code lookup', async () => {
    const victim = newWallet();
    const forger = newWallet();
    const template = await signIn(forger, '/keys', 'GET', {
      change: { nonce: 'f'.repeat(32) },
      after: (p) => {
        p.address = victim.address;
      },
    });
    const madeUp = await rpcDuring(async () => {
      for (let i = 0; i < 200; i++) {
        const answer = await send(template);
        assert.equal(answer.status, 401);
        assert.equal(answer.body.error.code, 'siwx_invalid');
      }
    });
    assert.equal(total(madeUp), 0, `RPC calls for 200 forged sign-ins with a made-up nonce: ${JSON.stringify(madeUp)}`);

    // Real challenges, signed by another key than the address named: refused after one look at the address's code.
    const headers: string[] = [];
    for (let i = 0; i < 50; i++)
      headers.push(
        await signIn(forger, '/keys', 'GET', {
          after: (p) => {
            p.address = victim.address;
          },
        }),
      );
    const badSignature = await rpcDuring(async () => {
      for (const header of headers) {
        const answer = await send(header);
        assert.equal(answer.status, 401, JSON.stringify(answer.body));
        assert.equal(answer.body.error.code, 'siwx_invalid');
        assert.match(answer.body.error.message, /not by/);
      }
    });
    assert.ok(
      total(badSignature) <= 1 && !badSignature.eth_call,
      `RPC calls for 50 bad EOA signatures: ${JSON.stringify(badSignature)}`,
    );
  });

  test('an ERC-6492 signature whose factory is not allowed is refused without any RPC call (its code would run in our eth_call)', async () => {
    const wallet = newWallet();
    const factory = newWallet().address;
    const headers: string[] = [];
    for (let i = 0; i < 20; i++) {
      headers.push(
        await signIn(wallet, '/keys', 'GET', {
          after: (p) => {
            p.address = newWallet().address;
            p.signature = serializeErc6492Signature({
              address: factory,
              data: '0xdeadbeef',
              signature: p.signature as Hex,
            });
          },
        }),
      );
    }
    const spent = await rpcDuring(async () => {
      for (const header of headers) {
        const answer = await send(header);
        assert.equal(answer.status, 401, JSON.stringify(answer.body));
        assert.equal(answer.body.error.code, 'siwx_invalid');
        assert.match(answer.body.error.message, /factory/);
      }
    });
    assert.equal(total(spent), 0, JSON.stringify(spent));
  });

  test('a smart wallet (EIP-1271) still signs in; its eth_call has a gas cap', async () => {
    const acceptsAll = await contractWallet('0x631626ba7e60e01b60005260206000f3');
    const header = await signIn(newWallet(), '/keys', 'GET', {
      after: (p) => {
        p.address = acceptsAll;
      },
    });
    const answer = await send(header);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.wallet_address, acceptsAll.toLowerCase());
    const call = proxy.requests
      .filter((r) => r.method === 'eth_call' && r.params[0]?.to?.toLowerCase() === acceptsAll.toLowerCase())
      .at(-1);
    assert.ok(call, 'the wallet contract was asked');
    assert.ok(
      call.params[0].gas && BigInt(call.params[0].gas) <= 500_000n,
      `gas of the eth_call: ${call.params[0].gas}`,
    );
  });

  test('forged signatures for one smart wallet: at most 10 chain checks a minute, then 429 chain_checks_busy', async () => {
    const loops = await contractWallet('0x5b600056'); // JUMPDEST PUSH1 0 JUMP: runs until the gas is gone
    const headers: string[] = [];
    for (let i = 0; i < 15; i++)
      headers.push(
        await signIn(newWallet(), '/keys', 'GET', {
          after: (p) => {
            p.address = loops;
          },
        }),
      );
    const codes: string[] = [];
    const spent = await rpcDuring(async () => {
      for (const header of headers) codes.push((await send(header)).body.error.code);
    });
    assert.ok((spent.eth_call ?? 0) <= 10 && total(spent) <= 11, JSON.stringify(spent));
    assert.ok(
      codes.slice(0, 9).every((code) => code === 'siwx_invalid'),
      codes.join(),
    );
    assert.equal(codes.at(-1), 'chain_checks_busy');
  });

  test('GET /health: 50 requests, at most two chain probes (the probe is cached a few seconds)', async () => {
    const spent = await rpcDuring(async () => {
      for (let i = 0; i < 50; i++)
        assert.equal((await request(anonymous(), 'GET', '/health', { auth: false })).status, 200);
    });
    assert.ok(total(spent) <= 2, JSON.stringify(spent));
  });

  test('forged payments are refused before the facilitator: wrong amount, payee or validity cost no RPC; a signature not by from one code lookup', async () => {
    const buyer = new TestWallet(dev.buyer.private_key, dev.chain.rpc_url);
    const key = `forged-${Date.now()}`;
    const body = {
      product_id: 'instant-stream',
      email: 'agent@example.com',
      station_name: 'Forged FM',
      parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 },
    };
    const ask = await request(c, 'POST', '/orders', { body, headers: { 'idempotency-key': key } });
    assert.equal(ask.status, 402, JSON.stringify(ask.body));
    const required = ask.headers.get('payment-required')!;
    const tampered = (change: (authorization: Record<string, string>) => void) =>
      buyer.pay(required, (p) => change((p.payload as any).authorization));
    const now = Math.floor(Date.now() / 1000);
    const local = [
      await tampered((x) => {
        x.value = String(BigInt(x.value) - 1n);
      }),
      await tampered((x) => {
        x.to = newWallet().address;
      }),
      await buyer.payWithValidity(required, 0n, BigInt(now - 60)),
      await buyer.payWithValidity(required, BigInt(now + 3600), BigInt(now + 7200)),
    ];
    const pay = (signature: string) =>
      request(c, 'POST', '/orders', { body, headers: { 'idempotency-key': key, 'payment-signature': signature } });
    const spentLocal = await rpcDuring(async () => {
      for (let round = 0; round < 5; round++) {
        for (const signature of local) {
          const answer = await pay(signature);
          assert.equal(answer.status, 402, JSON.stringify(answer.body));
          assert.equal(answer.body.error.code, 'payment_rejected');
        }
      }
    });
    assert.equal(total(spentLocal), 0, JSON.stringify(spentLocal));

    // Signed by the buyer, claiming another payer: its signature recovers to the buyer. One look at that payer's code.
    const impostor = newWallet().address;
    const forged = decodePaymentSignatureHeader(await buyer.pay(required));
    (forged.payload as any).authorization.from = impostor;
    const spentForged = await rpcDuring(async () => {
      for (let i = 0; i < 20; i++) {
        const answer = await pay(encodePaymentSignatureHeader(forged));
        assert.equal(answer.status, 402, JSON.stringify(answer.body));
        assert.equal(answer.body.error.code, 'payment_rejected');
        assert.match(answer.body.error.message, /not by/);
      }
    });
    assert.ok(total(spentForged) <= 1 && !spentForged.eth_call, JSON.stringify(spentForged));

    // Claiming a smart wallet as payer: its contract is asked once per request, with a gas cap, before the facilitator.
    const burner = await contractWallet('0x5b600056');
    const asBurner = decodePaymentSignatureHeader(await buyer.pay(required));
    (asBurner.payload as any).authorization.from = burner;
    const firstCall = proxy.requests.length;
    const spentBurner = await rpcDuring(async () => {
      for (let i = 0; i < 3; i++) {
        const answer = await pay(encodePaymentSignatureHeader(asBurner));
        assert.equal(answer.status, 402, JSON.stringify(answer.body));
        assert.match(answer.body.error.message, /does not accept/);
      }
    });
    assert.ok(total(spentBurner) <= 4, JSON.stringify(spentBurner));
    const calls = proxy.requests.slice(firstCall).filter((r) => r.method === 'eth_call');
    assert.ok(
      calls.length > 0 && calls.every((r) => r.params[0].gas && BigInt(r.params[0].gas) <= 500_000n),
      JSON.stringify(calls.map((r) => r.params[0].gas)),
    );

    // The real payment still goes through.
    const paid = await pay(await buyer.pay(required));
    assert.equal(paid.status, 200, JSON.stringify(paid.body));
  });
});

describe('a sign-in proves one request: the method and path its challenge was issued for', () => {
  test('a proof for GET /keys is refused on POST /keys, DELETE /keys/{id} and GET /services with 401 siwx_wrong_resource', async () => {
    const wallet = newWallet();
    const cases: Array<[string, string]> = [
      ['POST', '/keys'],
      ['DELETE', '/keys/0123456789abcdef'],
      ['GET', '/services'],
    ];
    for (const [method, path] of cases) {
      const answer = await send(await signIn(wallet), path, method);
      assert.equal(answer.status, 401, `${method} ${path}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'siwx_wrong_resource', `${method} ${path}`);
      assert.ok(
        answer.body.error.message.includes(
          `Ask ${method} ${new URL(c.baseUrl).pathname}${path} again without SIGN-IN-WITH-X`,
        ),
        answer.body.error.message,
      );
    }
    // Same path, other method: the nonce says which method it was issued for.
    const forPost = await send(await signIn(wallet, '/keys', 'POST'), '/keys', 'GET');
    assert.equal(forPost.body.error.code, 'siwx_wrong_resource');
    assert.match(forPost.body.error.message, /issued for POST \/api\/v1\/keys/);
    // A client that rewrites uri and resources to the route it wants: the nonce was not issued for it.
    const rewritten = await signIn(wallet, '/keys', 'POST', {
      change: { uri: `${c.baseUrl}/keys/0123456789abcdef`, resources: [`${c.baseUrl}/keys/0123456789abcdef`] },
    });
    const moved = await send(rewritten, '/keys/0123456789abcdef', 'DELETE');
    assert.equal(moved.status, 401);
    assert.notEqual(moved.body.error.code, undefined);
    assert.ok(['siwx_invalid', 'siwx_wrong_resource'].includes(moved.body.error.code), moved.body.error.code);
    // The refusals did not use the proofs up: each still works where it was issued for.
    const header = await signIn(wallet, '/keys', 'GET');
    assert.equal((await send(header, '/keys', 'POST')).status, 401);
    assert.equal((await send(header, '/keys', 'GET')).status, 200);
  });
});

describe('sign-in challenges are not stored until redeemed', () => {
  test('300 challenges add no row; a redeemed one adds one', async () => {
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      const rows = async () => {
        const { rows: tables } = await db.query(
          "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'wallet_sign_in%'",
        );
        let sum = 0;
        for (const { table_name: name } of tables)
          sum += Number((await db.query(`SELECT count(*) AS n FROM ${name}`)).rows[0].n);
        return sum;
      };
      const before = await rows();
      const asked = await Promise.all(
        Array.from({ length: 300 }, () => request(anonymous(), 'GET', '/keys', { auth: false })),
      );
      assert.ok(asked.every((r) => r.status === 402));
      assert.equal(new Set(asked.map((r) => challengeOf(r).info.nonce)).size, 300, 'every challenge has its own nonce');
      assert.equal((await rows()) - before, 0, 'rows stored for 300 challenges');
      assert.equal((await send(await signedHeader(challengeOf(asked[0]), newWallet()))).status, 200);
      assert.equal((await rows()) - before, 1, 'the redeemed nonce is stored');
      assert.equal(
        (await send(await signedHeader(challengeOf(asked[1]), newWallet()))).status,
        200,
        'any unexpired challenge can be redeemed',
      );
    } finally {
      await db.end();
    }
  });
});

describe('malformed sign-in messages get 401 siwx_invalid, never a 500', () => {
  test('a statement with a line break, wrong types, bad dates, garbage', async () => {
    const wallet = newWallet();
    const asked = await request(anonymous(), 'GET', '/keys', { auth: false });
    const info = challengeOf(asked).info;
    const base = {
      ...info,
      chainId: 'eip155:8453',
      type: 'eip191',
      address: wallet.address,
      signature: `0x${'11'.repeat(65)}`,
    };
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
    const cases: Record<string, string> = {
      // The package's own client refuses to format it; a client of its own sends it anyway.
      'statement with a line break': b64({ ...base, statement: 'Sign in\nURI: https://evil.example' }),
      'statement with a carriage return': b64({ ...base, statement: 'a\rb' }),
      'numbers for strings': b64({ ...base, nonce: 12345, issuedAt: 7 }),
      'nonce an object': b64({ ...base, nonce: { a: 1 } }),
      'resources not a list': b64({ ...base, resources: 'https://x' }),
      'address garbage': b64({ ...base, address: 'not-an-address' }),
      'address lower case (not EIP-55)': b64({ ...base, address: wallet.address.toLowerCase() }),
      'issuedAt not a date': b64({ ...base, issuedAt: 'yesterday' }),
      'version 2': b64({ ...base, version: '2' }),
      'huge statement': b64({ ...base, statement: 'x'.repeat(5000) }),
      'JSON null': b64(null),
      'JSON array': b64([1, 2]),
      'signature not hex': b64({ ...base, signature: 'zz' }),
    };
    for (const [name, header] of Object.entries(cases)) {
      const answer = await send(header);
      assert.equal(answer.status, 401, `${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, 'siwx_invalid', name);
    }
    assert.doesNotMatch(c.output(), /"level":(50|60)|"level":"error"/, 'no error-level log');
  });
});

describe('the x402 clients sign in to the real service', () => {
  test('wrapFetchWithSIWx (@x402/extensions) signs in and reads GET /keys', async () => {
    const wallet = newWallet();
    const signedIn = wrapFetchWithSIWx(fetch, wallet);
    const answer = await signedIn(`${c.baseUrl}/keys`);
    assert.equal(answer.status, 200, await answer.clone().text());
    assert.equal(((await answer.json()) as any).wallet_address, wallet.address.toLowerCase());
    const posted = await signedIn(`${c.baseUrl}/keys`, { method: 'POST' });
    assert.equal(posted.status, 201, await posted.clone().text());
  });

  test('createSIWxClientHook with @x402/fetch signs in and reads GET /keys', async () => {
    const wallet = newWallet();
    const client = new x402HTTPClient(new x402Client()).onPaymentRequired(createSIWxClientHook(wallet));
    const answer = await wrapFetchWithPayment(fetch, client)(`${c.baseUrl}/keys`);
    assert.equal(answer.status, 200, await answer.clone().text());
    assert.equal(((await answer.json()) as any).wallet_address, wallet.address.toLowerCase());
  });

  test('the challenge names the chain in accepts with nothing to pay; a paying client cannot pay it, and a payment sent is not used', async () => {
    const asked = await request(anonymous(), 'GET', '/keys', { auth: false });
    const required = decodePaymentRequiredHeader(asked.headers.get('payment-required')!);
    assert.equal(required.accepts.length, 1);
    assert.equal(required.accepts[0].network, 'eip155:8453');
    assert.equal(required.accepts[0].amount, '0');
    assert.notEqual(required.accepts[0].scheme, 'exact');

    const buyer = privateKeyToAccount(dev.buyer.private_key);
    const payer = registerExactEvmScheme(new x402Client(), { signer: buyer });
    const paying = wrapFetchWithPayment(fetch, payer);
    const outcome = await paying(`${c.baseUrl}/keys`).then(
      (r) => `status ${r.status}`,
      (e: Error) => `refused by the client: ${e.message}`,
    );
    // Its only entry is of a scheme no payment client has: the client stops before signing anything.
    assert.match(outcome, /refused by the client: .*No network\/scheme registered.*sign-in-with-x/s, outcome);

    // A client that sends a payment anyway (an exact payment built for a paid route): not used, and told so.
    const order = await request(c, 'POST', '/orders', {
      body: {
        product_id: 'instant-stream',
        email: 'a@example.com',
        station_name: 'X',
        parameters: { duration_hours: 1, max_listeners: 1, bitrate_kbps: 64 },
      },
      headers: { 'idempotency-key': `pay-sign-in-${Date.now()}` },
    });
    const payment = await new TestWallet(dev.buyer.private_key, dev.chain.rpc_url).pay(
      order.headers.get('payment-required')!,
    );
    const sent = await request(anonymous(), 'GET', '/keys', { auth: false, headers: { 'payment-signature': payment } });
    assert.equal(sent.status, 402);
    assert.equal(sent.body.error.code, 'authentication_required');
    assert.match(sent.body.error.message, /^Nothing was charged/);
    assert.equal(sent.headers.get('payment-response'), null);
    const { accepted, payload } = decodePaymentSignatureHeader(payment);
    const state = encodeFunctionData({
      abi: authorizationState,
      functionName: 'authorizationState',
      args: [buyer.address, (payload as any).authorization.nonce],
    });
    assert.equal(
      BigInt((await chainRpc('eth_call', [{ to: accepted.asset, data: state }, 'latest'])) as string),
      0n,
      'the authorization was never used on chain',
    );
  });
});

// Last: it spends this instance's chain-check budget for the minute.
describe('a flood of sign-ins naming ever new addresses', () => {
  test('chain checks stop at the budget of the instance (120 a minute), then 429', async () => {
    const headers: string[] = [];
    for (let i = 0; i < 140; i++)
      headers.push(
        await signIn(newWallet(), '/keys', 'GET', {
          after: (p) => {
            p.address = newWallet().address;
          },
        }),
      );
    const codes = new Map<string, number>();
    const spent = await rpcDuring(async () => {
      for (const header of headers) {
        const code = (await send(header)).body.error.code as string;
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    });
    assert.ok(total(spent) <= 120, JSON.stringify(spent));
    assert.ok((codes.get('chain_checks_busy') ?? 0) >= 20, JSON.stringify([...codes]));
  });
});
