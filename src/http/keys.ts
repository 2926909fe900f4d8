import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { credentialsOf, type Callers, type SelfServiceKeys } from '../identity/index.js';
import type { ApiKey, ApiKeys } from '../keys/index.js';
import { bodyReader } from './request-body.js';
import { limitKey } from '../transport/index.js';

export interface KeyRouteDeps {
  keys: ApiKeys;
  callers: Callers;
  selfServiceKeys: SelfServiceKeys;
  publicBaseUrl: () => string;
}

const keyId = /^[0-9a-f]{16}$/;
const keyRequestSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 100, description: 'A name to tell your keys apart in GET /keys.' },
  },
};
const readKeyRequest = bodyReader<{ name?: string }>(keyRequestSchema, 'key request');

/** Self-service keys: a wallet signs in (SIWX) to get, list and revoke its own agent API keys. */
export function keyRoutes(router: Router, deps: KeyRouteDeps): void {
  const wallet = (ctx: Context, description: string) =>
    deps.callers.wallet(credentialsOf(ctx, deps.publicBaseUrl(), description));

  router.post('/keys', async (ctx) => {
    deps.selfServiceKeys.assertEnabled();
    const address = await wallet(ctx, 'A new agent API key bound to this wallet');
    const hasBody = Number(ctx.get('Content-Length') || 0) > 0 || Boolean(ctx.get('Transfer-Encoding'));
    const { name } = hasBody ? await readKeyRequest(ctx) : {};
    const { key, token } = await deps.selfServiceKeys.issue(address, limitKey(ctx.ip), name ?? `wallet ${address}`);
    ctx.status = 201;
    ctx.body = {
      ok: true,
      api_key: token,
      key: { ...keyDocument(key), wallet_address: address },
      note: 'The api_key is shown only now: keep it. Send it as "Authorization: Bearer <api_key>".',
    };
  });

  router.get('/keys', async (ctx) => {
    const address = await wallet(ctx, 'The agent API keys of this wallet');
    ctx.body = { ok: true, wallet_address: address, keys: (await deps.keys.listForWallet(address)).map(keyDocument) };
  });

  router.delete('/keys/:key_id', async (ctx) => {
    const notFound = () =>
      new ApiError(
        404,
        'key_not_found',
        'This wallet has no live key with this id. GET /keys lists your keys and which are revoked.',
      );
    const id = ctx.params.key_id;
    // Before the sign-in challenge, which names the requested URL (see services.ts).
    if (!keyId.test(id)) throw notFound();
    const address = await wallet(ctx, 'Revoke an agent API key of this wallet');
    if (!(await deps.keys.revokeForWallet(address, id))) throw notFound();
    ctx.body = { ok: true, revoked: id };
  });
}

function keyDocument(key: ApiKey) {
  return {
    id: key.id,
    name: key.name,
    created_at: key.created_at.toISOString(),
    revoked_at: key.revoked_at?.toISOString() ?? null,
  };
}
