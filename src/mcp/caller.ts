import { KeyRevoked, type ApiKey, type ApiKeys } from '../keys/index.js';

/**
 * Who calls the MCP endpoint. This is the one place where an MCP request's identity is resolved: today the bearer
 * key of the HTTP request (as on the REST API); wallet sign-in (SIWX) belongs here too.
 */
export interface Caller {
  /** The caller's key, checked now; the 401 error document without a valid one. */
  key(): Promise<ApiKey>;
  /** The key for a write that refuses a revoked key itself (quotes, orders), as the REST routes use it. */
  keyForWrite(): Promise<ApiKey>;
  /** The error to answer when such a write found the key revoked meanwhile (any other error unchanged). */
  revokedDuring(e: unknown): unknown;
}

export function identify(authorization: string | undefined, keys: ApiKeys): Caller {
  return {
    key: () => keys.authenticate(authorization),
    keyForWrite: () => keys.authenticateForWrite(authorization),
    revokedDuring: (e) => (e instanceof KeyRevoked ? keys.revokedDuringRequest(authorization) : e),
  };
}
