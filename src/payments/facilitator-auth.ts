import { createPrivateKey, createPublicKey, randomBytes, sign, verify, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * API-key JWTs for hosted facilitators, in the shape Coinbase's CDP documents for its APIs (and its x402 facilitator
 * at https://api.cdp.coinbase.com/platform/v2/x402): one short-lived token per request, signed with the operator's API
 * key, naming the one request it is good for.
 *
 * Header: `alg` ES256 (an EC P-256 key) or EdDSA (an Ed25519 key), `kid` the key's name, `typ` JWT, `nonce` 16 random
 * bytes in hex. Claims: `iss` "cdp", `sub` the key's name, `aud` ["cdp_service"], `iat` = `nbf` = now, `exp` = now +
 * 120 s, `uris` ["METHOD host/path"] (e.g. "POST api.cdp.coinbase.com/platform/v2/x402/settle"; host with its port when
 * the URL names one). Sent as `Authorization: Bearer <token>`.
 *
 * The key file is the JSON CDP's portal downloads: `{"id": "…", "privateKey": "…"}` (or the older
 * `{"name": "organizations/…/apiKeys/…", "privateKey": "-----BEGIN EC PRIVATE KEY-----…"}`); the private key is a PEM EC
 * key, or an Ed25519 key as base64 of its 32-byte seed followed by its 32-byte public key.
 */
export interface FacilitatorAuthKey {
  name: string;
  alg: 'ES256' | 'EdDSA';
  privateKey: KeyObject;
}

/** How long one token is good for: CDP's default. */
const TOKEN_SECONDS = 120;

/** A token whose validity is longer than this is refused by the verifier: a token is made per request. */
const LONGEST_TOKEN_SECONDS = 300;

/** Clock difference tolerated between the two machines. */
const CLOCK_SKEW_SECONDS = 30;

/** Reads an API key file; throws one sentence that says what is wrong with it and what it must hold. */
export function readFacilitatorAuthKey(file: string): FacilitatorAuthKey {
  const shape =
    'a JSON object {"id" (or "name"): the API key name, "privateKey": a PEM EC P-256 private key or a base64 Ed25519 key} as CDP downloads it';
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(
      `${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): it must hold ${shape}`,
    );
  }
  let parsed: { id?: unknown; name?: unknown; privateKey?: unknown };
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    throw new Error(`${file} is not JSON: it must hold ${shape}`);
  }
  const name = typeof parsed?.id === 'string' ? parsed.id : parsed?.name;
  if (typeof name !== 'string' || !name || typeof parsed.privateKey !== 'string') {
    throw new Error(`${file} lacks "id" (or "name") or "privateKey": it must hold ${shape}`);
  }
  return { name, ...privateKeyOf(parsed.privateKey, file) };
}

function privateKeyOf(secret: string, file: string): Pick<FacilitatorAuthKey, 'alg' | 'privateKey'> {
  if (secret.includes('-----BEGIN')) {
    let key: KeyObject;
    try {
      key = createPrivateKey(secret);
    } catch (e) {
      throw new Error(`${file}: its privateKey is not a readable PEM private key (${(e as Error).message})`);
    }
    if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1')
      return { alg: 'ES256', privateKey: key };
    if (key.asymmetricKeyType === 'ed25519') return { alg: 'EdDSA', privateKey: key };
    throw new Error(`${file}: its privateKey must be an EC P-256 or an Ed25519 key, not ${key.asymmetricKeyType}`);
  }
  const raw = Buffer.from(secret, 'base64');
  if (raw.length !== 64) {
    throw new Error(`${file}: its privateKey is neither PEM nor a base64 Ed25519 key (64 bytes: seed and public key)`);
  }
  // PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410).
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), raw.subarray(0, 32)]);
  return { alg: 'EdDSA', privateKey: createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }) };
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** One token for one request: `method` and the full URL it goes to. */
export function facilitatorJwt(key: FacilitatorAuthKey, method: string, url: string, now = Date.now()): string {
  const { host, pathname } = new URL(url);
  const seconds = Math.floor(now / 1000);
  const header = { alg: key.alg, kid: key.name, typ: 'JWT', nonce: randomBytes(16).toString('hex') };
  const claims = {
    iss: 'cdp',
    sub: key.name,
    aud: ['cdp_service'],
    iat: seconds,
    nbf: seconds,
    exp: seconds + TOKEN_SECONDS,
    uris: [`${method.toUpperCase()} ${host}${pathname}`],
  };
  const signed = `${base64url(header)}.${base64url(claims)}`;
  const signature = sign(
    key.alg === 'ES256' ? 'sha256' : null,
    Buffer.from(signed),
    key.alg === 'ES256' ? { key: key.privateKey, dsaEncoding: 'ieee-p1363' } : key.privateKey,
  );
  return `${signed}.${signature.toString('base64url')}`;
}

/**
 * HTTPFacilitatorClient's `createAuthHeaders` for a facilitator at `baseUrl`: fresh tokens, one per path, each time
 * the client makes a request.
 */
export function facilitatorAuthHeaders(key: FacilitatorAuthKey, baseUrl: string) {
  const base = baseUrl.replace(/\/+$/, '');
  const bearer = (method: string, path: string) => ({
    Authorization: `Bearer ${facilitatorJwt(key, method, `${base}/${path}`)}`,
  });
  return async () => ({
    verify: bearer('POST', 'verify'),
    settle: bearer('POST', 'settle'),
    supported: bearer('GET', 'supported'),
  });
}

/** The public half of a key, for a facilitator that checks the tokens (FACILITATOR_AUTH_PUBLIC_KEY_FILE). */
export function readFacilitatorAuthPublicKey(file: string): KeyObject {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    const key = createPublicKey(text);
    if (key.asymmetricKeyType !== 'ec' && key.asymmetricKeyType !== 'ed25519') throw new Error('not EC or Ed25519');
    return key;
  } catch (e) {
    throw new Error(`${file} must hold a PEM public key, EC P-256 or Ed25519 (${(e as Error).message})`);
  }
}

/**
 * Why a request's Authorization header does not carry a valid token for `METHOD host/path` signed by `publicKey`, or
 * undefined when it does.
 */
export function facilitatorJwtRefusal(
  authorization: string | undefined,
  publicKey: KeyObject,
  request: { method: string; host: string; path: string },
  now = Date.now(),
): string | undefined {
  const token = /^Bearer ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(authorization ?? '');
  if (!token) return 'no bearer token: this facilitator requires an API-key JWT (Authorization: Bearer …)';
  let header: { alg?: string; kid?: string };
  let claims: { iss?: string; sub?: string; nbf?: number; exp?: number; uris?: unknown };
  try {
    header = JSON.parse(Buffer.from(token[1], 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(token[2], 'base64url').toString('utf8'));
  } catch {
    return 'the bearer token is not a JWT';
  }
  const alg = publicKey.asymmetricKeyType === 'ec' ? 'ES256' : 'EdDSA';
  if (header.alg !== alg) return `the token is signed with ${String(header.alg)}, not ${alg}`;
  const valid = verify(
    alg === 'ES256' ? 'sha256' : null,
    Buffer.from(`${token[1]}.${token[2]}`),
    alg === 'ES256' ? { key: publicKey, dsaEncoding: 'ieee-p1363' } : publicKey,
    Buffer.from(token[3], 'base64url'),
  );
  if (!valid) return 'the token is not signed by the API key this facilitator accepts';
  if (claims.iss !== 'cdp' || !claims.sub || claims.sub !== header.kid) return 'the token names no key (iss, sub, kid)';
  const seconds = now / 1000;
  if (typeof claims.nbf !== 'number' || typeof claims.exp !== 'number') return 'the token has no nbf or exp';
  if (claims.nbf > seconds + CLOCK_SKEW_SECONDS) return 'the token is not valid yet (nbf)';
  if (claims.exp < seconds - CLOCK_SKEW_SECONDS) return 'the token expired (exp)';
  if (claims.exp - claims.nbf > LONGEST_TOKEN_SECONDS)
    return `the token is valid longer than ${LONGEST_TOKEN_SECONDS} s`;
  const uri = `${request.method} ${request.host}${request.path}`;
  if (!Array.isArray(claims.uris) || !claims.uris.includes(uri)) return `the token is not made out for ${uri}`;
  return undefined;
}
