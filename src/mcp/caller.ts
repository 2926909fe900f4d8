import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { credentialsOf } from '../identity/index.js';
import { limitKey } from '../transport/index.js';
import type { Callers } from '../identity/index.js';
import { KeyRevoked, type ApiKey, type ApiKeys } from '../keys/index.js';
import { ownedService } from '../operations/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';

/**
 * Who calls the MCP endpoint. This is the one place where an MCP request's identity is resolved: the bearer key of
 * the HTTP request (as on the REST API), or for a service's tools the wallet that paid for it, signed in with a
 * SIGN-IN-WITH-X header on the HTTP request. The header is checked (and its nonce used up) only by a tool that needs
 * it, so one signed message serves one call; the create_api_key tool turns that one call into a key.
 */
export interface Caller {
  /**
   * The caller's key, for a write that refuses a revoked key itself (quotes, orders), as the REST routes use it; 401
   * without a valid one.
   */
  keyForWrite(): Promise<ApiKey>;
  /**
   * A service the caller may read and manage (one its key ordered, or one its signed-in wallet paid for), or undefined;
   * 401 or the sign-in challenge otherwise.
   */
  ownedService(services: ServiceRecords | undefined, serviceId: string): Promise<ServiceRow | undefined>;
  /** The error to answer when such a write found the key revoked meanwhile (any other error unchanged). */
  revokedDuring(e: unknown): unknown;
  /**
   * The wallet signed in on this request (an API key does not stand for one); the sign-in challenge, or 401, otherwise.
   */
  signedInWallet(description: string): Promise<string>;
  /** What self-service key limits count this caller against: its address, IPv6 by its /64 (as POST /keys). */
  clientAddress: string;
}

export function identify(
  ctx: Context,
  keys: ApiKeys,
  signIn?: { callers: Callers; publicBaseUrl: () => string },
): Caller {
  const authorization = ctx.get('Authorization') || undefined;
  return {
    keyForWrite: () => keys.authenticateForWrite(authorization),
    ownedService: async (services, serviceId) => {
      if (!signIn) return services?.owned((await keys.authenticate(authorization)).id, serviceId);
      const caller = await signIn.callers.resolve(
        credentialsOf(ctx, signIn.publicBaseUrl(), 'A service bought with this API key or paid by this wallet'),
      );
      return ownedService(services, caller, serviceId);
    },
    revokedDuring: (e) => (e instanceof KeyRevoked ? keys.revokedDuringRequest(authorization) : e),
    signedInWallet: async (description) => {
      if (!signIn) throw new ApiError(403, 'agent_signup_disabled', 'This deployment has no wallet sign-in.');
      return signIn.callers.wallet(credentialsOf(ctx, signIn.publicBaseUrl(), description));
    },
    clientAddress: limitKey(ctx.ip),
  };
}
