import type { Context } from 'koa';
import { credentialsOf, type Caller, type Callers } from '../identity/index.js';
import type { ApiKeys } from '../keys/index.js';

export interface CallerDeps {
  keys: ApiKeys;
  /** Wallet sign-in; without it only the bearer key is accepted. */
  callers?: Callers;
  publicBaseUrl: () => string;
}

/** The caller of a route that takes an API key or a signed-in wallet. */
export async function callerOf(ctx: Context, deps: CallerDeps, description: string): Promise<Caller> {
  if (!deps.callers)
    return { kind: 'api_key', key: await deps.keys.authenticate(ctx.get('Authorization') || undefined) };
  return deps.callers.resolve(credentialsOf(ctx, deps.publicBaseUrl(), description));
}
