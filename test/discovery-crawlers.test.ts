import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { recoverMessageAddress, type Hex } from 'viem';
import { servedOwnershipProofs } from '../src/cli/ownership-proofs.js';
import { DEV_ROLES } from '../src/chain/index.js';
import { npmScratch } from './support/npm-scratch.js';
import { buy } from './support/purchase.js';
import { cli, scratchDir, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader } from './support/wallet.js';
import { buyerWallet } from './support/dev-file.js';

/**
 * What the crawlers of x402 agents find with nothing but the site's origin: agentcash's discovery runtime
 * (@agentcash/discovery, which x402scan runs for its own registration too), and x402scan's documented rules
 * (docs/DISCOVERY.md of Merit-Systems/x402scan), modelled here independently: OpenAPI first (x-payment-info, a
 * documented 402, an input schema), then /.well-known/x402 {version, resources, ownershipProofs}, ownership proofs
 * that recover to the 402's payTo from the site's origin, and a live 402 per resource in atomic units.
 */
const DISCOVERY = '@agentcash/discovery@1.7.5';
const MAX_DESCRIPTION = 500;

let service: Service;
let origin: string;
let serviceId: string;
let openapi: any;
let wellKnown: any;
let discovery: any;

before(async () => {
  service = await startService();
  origin = new URL(service.baseUrl).origin;
  const wallet = await buyerWallet(service);
  const bought = await buy(service, wallet, orderBody);
  assert.equal(bought.status, 200, JSON.stringify(bought.body));
  serviceId = bought.body.service.service_id;
  openapi = await (await fetch(`${origin}/openapi.json`)).json();
  wellKnown = await (await fetch(`${origin}/.well-known/x402`)).json();
  const dir = await npmScratch('agentcash-discovery', [DISCOVERY]);
  discovery = await import(join(dir, 'node_modules/@agentcash/discovery/dist/index.js'));
});
after(() => service?.stop());

const orderBody = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Crawler FM',
  parameters: { duration_hours: 1, max_listeners: 2, bitrate_kbps: 64 },
};
/** A body each paid operation accepts (x402scan probes with a sample body when the bare probe gets no 402). */
const SAMPLES: Record<string, Record<string, unknown>> = {
  '/api/v1/orders': orderBody,
  '/api/v1/services/{service_id}/upgrade': { product_id: 'event-stream' },
  '/api/v1/services/{service_id}/extend': { duration_hours: 1 },
};

type Operation = { method: string; path: string; operation: any };
/** The operations the OpenAPI document says are paid: those with x-payment-info. */
function paidOperations(document: any): Operation[] {
  return Object.entries(document.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, operation]) => operation?.['x-payment-info'])
      .map(([method, operation]) => ({ method: method.toUpperCase(), path, operation })),
  );
}
const urlOf = (path: string) => `${origin}${path.replace('{service_id}', serviceId)}`;
/** The headers a registrant gives a crawler for this API: its key, and a new Idempotency-Key per request. */
const credentials = () => ({ authorization: `Bearer ${service.apiKey}`, 'idempotency-key': randomUUID() });

describe("agentcash's discovery (@agentcash/discovery)", () => {
  test('lists every paid operation with its price range, and tells wallet sign-in from the API key', async () => {
    const found = await discovery.discoverOriginSchema({ target: origin });
    assert.equal(found.found, true, JSON.stringify(found));
    const paid = paidOperations(openapi);
    assert.deepEqual(paid.map((o) => `${o.method} ${o.path}`).sort(), [
      'POST /api/v1/orders',
      'POST /api/v1/services/{service_id}/extend',
      'POST /api/v1/services/{service_id}/upgrade',
    ]);
    const listed = new Map((found.endpoints as any[]).map((e) => [`${e.method} ${e.path}`, e]));
    for (const { method, path, operation } of paid) {
      const endpoint = listed.get(`${method} ${path}`);
      assert.ok(endpoint, `${method} ${path} found`);
      assert.equal(endpoint.authMode, 'paid', `${method} ${path}`);
      const { min, max } = operation['x-payment-info'].price;
      assert.equal(endpoint.price, `${min}-${max} USD`);
      assert.equal(endpoint.pricingMode, 'dynamic');
      assert.deepEqual(endpoint.protocols, ['x402']);
    }
    assert.equal(
      [...listed.values()].filter((e) => /paid/.test(e.authMode ?? '')).length,
      paid.length,
      'nothing else is listed as paid',
    );
    // The wallet sign-in scheme is recognised as such (not as an API key) where it is the only credential.
    assert.equal(listed.get('GET /api/v1/keys')?.authMode, 'siwx');
    assert.equal(found.trustTier, 'ownership_verified');
    assert.deepEqual(found.ownershipProofs, openapi['x-discovery'].ownershipProofs);
  });

  test('checks each paid operation live: a 402 with x402 v2 terms in atomic units, and its input schema', async () => {
    for (const { method, path } of paidOperations(openapi)) {
      const checked = await discovery.checkEndpointSchema({
        url: urlOf(path),
        probe: true,
        headers: credentials(),
        sampleInputBody: SAMPLES[path],
      });
      assert.equal(checked.found, true, `${path}: ${JSON.stringify(checked)}`);
      const advisory = (checked.advisories as any[]).find((a) => a.method === method);
      assert.ok(advisory, `${path}: ${JSON.stringify(checked.advisories.map((a: any) => a.method))}`);
      assert.equal(advisory.authMode, 'paid', path);
      assert.equal(advisory.inputSchema?.type, 'object', `${path} input schema`);
      assert.ok(Object.keys(advisory.inputSchema.properties ?? {}).length > 0, path);
      const [option] = advisory.paymentOptions;
      assert.equal(option.protocol, 'x402');
      assert.equal(option.version, 2);
      assert.match(option.amount, /^[1-9][0-9]*$/, `${path}: atomic units`);
      assert.equal(option.payTo, DEV_ROLES.payTo.address);
    }
  });
});

describe("x402scan's discovery rules (an independent model)", () => {
  test('OpenAPI first: every paid operation documents its 402, its price (dynamic, min ≤ max) and an input schema', () => {
    assert.equal(typeof openapi.openapi, 'string');
    assert.ok(openapi.info.title && openapi.info.version && openapi.paths);
    const paid = paidOperations(openapi);
    assert.ok(paid.length >= 3);
    for (const { path, operation } of paid) {
      const info = operation['x-payment-info'];
      assert.ok(operation.responses['402'], `${path} documents its 402`);
      assert.ok(
        info.protocols.some((p: unknown) => p === 'x402' || (typeof p === 'object' && p && 'x402' in p)),
        path,
      );
      assert.equal(info.price.mode, 'dynamic', path);
      assert.match(info.price.min, /^\d+(\.\d+)?$/);
      assert.match(info.price.max, /^\d+(\.\d+)?$/);
      assert.ok(Number(info.price.min) <= Number(info.price.max), path);
      assert.ok(operation.requestBody?.content?.['application/json']?.schema, `${path}: an input schema`);
      assert.ok(operation.security?.length ?? openapi.security?.length, `${path}: its auth is declared`);
    }
  });

  test('/.well-known/x402 lists the same paid resources, with ownership proofs', () => {
    assert.equal(wellKnown.version, 1);
    const resources = (wellKnown.resources as string[]).map((url) => new URL(url).pathname.replace(/:(\w+)/g, '{$1}'));
    assert.deepEqual(
      resources.sort(),
      paidOperations(openapi)
        .map((o) => o.path)
        .sort(),
    );
    assert.deepEqual(wellKnown.ownershipProofs, openapi['x-discovery'].ownershipProofs);
    assert.equal(wellKnown.ownershipProofs.length, 1);
  });

  test('each resource answers a live 402: non-empty accepts, amounts in atomic units, the bazaar input schema, a short description', async () => {
    const payTos = new Set<string>();
    for (const { path } of paidOperations(openapi)) {
      const response = await fetch(urlOf(path), {
        method: 'POST',
        headers: { ...credentials(), 'content-type': 'application/json' },
        body: JSON.stringify(SAMPLES[path]),
      });
      assert.equal(response.status, 402, `${path}: ${await response.clone().text()}`);
      const required = decodePaymentRequiredHeader(response.headers.get('payment-required')!);
      assert.ok(required.accepts.length > 0, path);
      for (const accept of required.accepts) {
        assert.match(accept.amount, /^[1-9][0-9]*$/, `${path}: amount in atomic units`);
        payTos.add(accept.payTo);
      }
      const bazaar = required.extensions?.bazaar as any;
      assert.ok(bazaar?.info && bazaar?.schema, `${path}: extensions.bazaar.info and schema`);
      assert.ok(bazaar.info.input?.body, `${path}: the input the schema describes`);
      assert.ok((required.resource.description ?? '').length < MAX_DESCRIPTION, path);
    }
    // Ownership: each proof recovers, from the site's origin, to the payTo the 402s name.
    assert.deepEqual([...payTos], [DEV_ROLES.payTo.address]);
    for (const proof of wellKnown.ownershipProofs) {
      assert.equal(await recoverMessageAddress({ message: origin, signature: proof as Hex }), DEV_ROLES.payTo.address);
      const elsewhere = await recoverMessageAddress({ message: 'https://elsewhere.example', signature: proof as Hex });
      assert.notEqual(elsewhere, DEV_ROLES.payTo.address, 'a proof is good for its own origin only');
    }
  });

  test(`every resource description is under ${MAX_DESCRIPTION} characters, in /.well-known/x402 and in OpenAPI`, async () => {
    const api = (await (await fetch(`${service.baseUrl}/openapi.json`)).json()) as any;
    for (const document of [openapi, api]) {
      for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, any>>)) {
        for (const [method, operation] of Object.entries(item)) {
          if (typeof operation !== 'object' || !operation?.responses) continue;
          // What crawlers take as the resource's description: the summary, else the description.
          const described = operation.summary ?? operation.description;
          assert.ok(described, `${method} ${path} is described`);
          assert.ok(described.length < MAX_DESCRIPTION, `${method} ${path}: ${described.length} characters`);
        }
      }
    }
    for (const item of wellKnown.items)
      assert.ok(item.resource.description.length < MAX_DESCRIPTION, `${item.resource.url}`);
  });
});

describe('ownership proofs a deployment publishes', () => {
  const warnings: string[] = [];
  const log = { info() {}, warn: (_: unknown, message: string) => warnings.push(message), error() {} };
  const settings = { publicBaseUrl: 'https://audio.example.com/api/v1', production: true, log };

  test("agent-audio ownership-proof signs the origin with payTo's key; serve publishes that proof, and no other", async () => {
    const keyFile = join(await scratchDir('ownership-proof-'), 'pay-to.key');
    await writeFile(keyFile, `${DEV_ROLES.payTo.privateKey}\n`, { mode: 0o600 });
    const signed = await cli(['ownership-proof', '--key-file', keyFile, '--origin', 'https://audio.example.com/']);
    assert.equal(signed.code, 0, signed.stderr);
    const { origin: signedOrigin, address, proof, setting } = JSON.parse(signed.stdout);
    assert.equal(signedOrigin, 'https://audio.example.com');
    assert.equal(address, DEV_ROLES.payTo.address);
    assert.equal(setting, `X402_OWNERSHIP_PROOFS=${proof}`);
    const other = JSON.parse(
      (await cli(['ownership-proof', '--key-file', keyFile, '--origin', 'https://other.example.com'])).stdout,
    ).proof;

    const served = await servedOwnershipProofs({
      ...settings,
      configured: [proof, other],
      payTo: DEV_ROLES.payTo.address,
    });
    assert.deepEqual(served, [proof]);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /is not X402_PAY_TO's signature of https:\/\/audio\.example\.com/);
    // Another wallet's payTo: none of them proves it.
    const foreign = await servedOwnershipProofs({ ...settings, configured: [proof], payTo: DEV_ROLES.buyer.address });
    assert.deepEqual(foreign, []);
    // Production never signs by itself, even with the development payTo.
    assert.deepEqual(await servedOwnershipProofs({ ...settings, configured: [], payTo: DEV_ROLES.payTo.address }), []);
  });

  test('the command refuses a key that is not X402_PAY_TO and a missing key file, naming what to fix', async () => {
    const keyFile = join(await scratchDir('ownership-proof-'), 'buyer.key');
    await writeFile(keyFile, DEV_ROLES.buyer.privateKey);
    const wrong = await cli(['ownership-proof', '--key-file', keyFile, '--origin', 'https://audio.example.com'], {
      X402_PAY_TO: DEV_ROLES.payTo.address,
    });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /not X402_PAY_TO's/);
    const missing = await cli(['ownership-proof', '--origin', 'https://audio.example.com']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--key-file/);
  });
});
