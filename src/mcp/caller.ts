import type { Context } from 'koa';
import { KeyRevoked, type ApiKey, type ApiKeys } from '../keys/index.js';
import type { ServiceRecords, ServiceRow } from '../services/index.js';

/**
 * Who calls the MCP endpoint. This is the one place where an MCP request's identity is resolved: today the bearer
 * key of the HTTP request (as on the REST API); wallet sign-in (SIWX) belongs here too.
 */
export interface Caller {
  /** The caller's key, for a write that refuses a revoked key itself (quotes, orders), as the REST routes use it; 401 without a valid one. */
  keyForWrite(): Promise<ApiKey>;
  /** A service the caller may read and manage (today: one its key ordered), or undefined; 401 without a valid key. */
  ownedService(services: ServiceRecords | undefined, serviceId: string): Promise<ServiceRow | undefined>;
  /** The error to answer when such a write found the key revoked meanwhile (any other error unchanged). */
  revokedDuring(e: unknown): unknown;
}

export function identify(ctx: Context, keys: ApiKeys): Caller {
  const authorization = ctx.get('Authorization') || undefined;
  return {
    keyForWrite: () => keys.authenticateForWrite(authorization),
    ownedService: async (services, serviceId) => {
      const key = await keys.authenticate(authorization);
      return services?.owned(key.id, serviceId);
    },
    revokedDuring: (e) => (e instanceof KeyRevoked ? keys.revokedDuringRequest(authorization) : e),
  };
}
