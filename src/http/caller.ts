import type { Context } from 'koa';
import type { Caller, Callers, Credentials } from '../identity/index.js';
import { SIGN_IN_HEADER } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';

export interface CallerDeps {
  keys: ApiKeys;
  /** Wallet sign-in; without it only the bearer key is accepted. */
  callers?: Callers;
  publicBaseUrl: () => string;
}

/** What this request brings to say who it is; the resource is named by its public URL, never the Host header. */
export function credentialsOf(ctx: Context, publicBaseUrl: string, description: string): Credentials {
  return {
    authorization: ctx.get('Authorization') || undefined,
    signIn: ctx.get(SIGN_IN_HEADER) || undefined,
    paymentSent: Boolean(ctx.get('PAYMENT-SIGNATURE')),
    method: ctx.method,
    resourceUrl: publicBaseUrl + ctx.path.replace(/^\/api\/v\d+/, ''),
    description,
  };
}

/** The caller of a route that takes an API key or a signed-in wallet. */
export async function callerOf(ctx: Context, deps: CallerDeps, description: string): Promise<Caller> {
  if (!deps.callers)
    return { kind: 'api_key', key: await deps.keys.authenticate(ctx.get('Authorization') || undefined) };
  return deps.callers.resolve(credentialsOf(ctx, deps.publicBaseUrl(), description));
}
