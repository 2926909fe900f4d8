import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  facilitatorAuthHeaders,
  facilitatorJwt,
  facilitatorJwtRefusal,
  readFacilitatorAuthKey,
} from '../src/payments/facilitator-auth.js';
import { scratchDir } from './support/service.js';

/** CDP-style API-key JWTs (src/payments/facilitator-auth.ts): both key types CDP issues, and what a checker refuses. */

const SETTLE = { method: 'POST', host: 'api.cdp.coinbase.com', path: '/platform/v2/x402/settle' };
const URL_ = 'https://api.cdp.coinbase.com/platform/v2/x402/settle';

test('an Ed25519 key as CDP downloads it (base64 seed and public key) signs EdDSA tokens for one request', async () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'jwk' }).d!;
  const pub = publicKey.export({ format: 'jwk' }).x!;
  const secret = Buffer.concat([Buffer.from(seed, 'base64url'), Buffer.from(pub, 'base64url')]).toString('base64');
  const file = join(await scratchDir('audio-cdp-key-'), 'cdp_api_key.json');
  await writeFile(file, JSON.stringify({ id: 'key-id-1', privateKey: secret }));
  const key = readFacilitatorAuthKey(file);
  assert.equal(key.alg, 'EdDSA');
  const token = facilitatorJwt(key, 'POST', URL_);
  const [header, claims] = token
    .split('.')
    .slice(0, 2)
    .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
  assert.equal(header.kid, 'key-id-1');
  assert.equal(header.typ, 'JWT');
  assert.match(header.nonce, /^[0-9a-f]{32}$/);
  assert.deepEqual(claims.uris, ['POST api.cdp.coinbase.com/platform/v2/x402/settle']);
  assert.equal(claims.iss, 'cdp');
  assert.equal(claims.sub, 'key-id-1');
  assert.equal(claims.exp - claims.nbf, 120);
  assert.equal(facilitatorJwtRefusal(`Bearer ${token}`, publicKey, SETTLE), undefined);
  const verify = { ...SETTLE, path: '/platform/v2/x402/verify' };
  assert.match(facilitatorJwtRefusal(`Bearer ${token}`, publicKey, verify)!, /not made out for POST/);
  const stale = facilitatorJwt(key, 'POST', URL_, Date.now() - 10 * 60_000);
  assert.match(facilitatorJwtRefusal(`Bearer ${stale}`, publicKey, SETTLE)!, /expired/);
  assert.match(facilitatorJwtRefusal(undefined, publicKey, SETTLE)!, /no bearer token/);
});

test('an EC key (ES256): headers per path, a token from another key refused', async () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const other = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const file = join(await scratchDir('audio-cdp-key-'), 'key.json');
  const pem = privateKey.export({ type: 'sec1', format: 'pem' }).toString();
  await writeFile(file, JSON.stringify({ name: 'organizations/o/apiKeys/k', privateKey: pem }));
  const key = readFacilitatorAuthKey(file);
  assert.equal(key.alg, 'ES256');
  const headers = await facilitatorAuthHeaders(key, 'https://api.cdp.coinbase.com/platform/v2/x402/')();
  const bearer = headers.settle.Authorization;
  assert.equal(facilitatorJwtRefusal(bearer, createPublicKey(privateKey), SETTLE), undefined);
  assert.match(facilitatorJwtRefusal(bearer, other.publicKey, SETTLE)!, /not signed by the API key/);
  const supported = { method: 'GET', host: SETTLE.host, path: '/platform/v2/x402/supported' };
  assert.equal(
    facilitatorJwtRefusal(headers.supported.Authorization, createPublicKey(privateKey), supported),
    undefined,
  );
  await writeFile(file, '{"name": "k"}');
  assert.throws(() => readFacilitatorAuthKey(file), /lacks "id" \(or "name"\) or "privateKey"/);
});
