import type { Context } from 'koa';
import type { Credentials } from './caller.js';
import { SIGN_IN_HEADER } from './wallet-sign-in.js';

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
