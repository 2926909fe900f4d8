import { ApiError } from '../errors/index.js';
import type { ApiKey, ApiKeys } from '../keys/index.js';
import type { Database } from '../store/index.js';

/** How far self-service sign-up goes (0 in a limit: no limit). */
export interface SignupPolicy {
  /** AGENT_SIGNUP=off turns POST /keys off; operators still create keys with `keys create`. */
  enabled: boolean;
  /** Keys one wallet may get per hour. */
  keysPerWalletPerHour: number;
  /** Keys one client address may get per hour, whatever the wallets. */
  keysPerIpPerHour: number;
  /** Unrevoked keys one wallet may hold at once. */
  liveKeysPerWallet: number;
}

interface SignupCounts {
  wallet_recent: number;
  wallet_wait: number | null;
  ip_recent: number;
  ip_wait: number | null;
  wallet_live: number;
}

/**
 * API keys a wallet gets for itself. The counts live in PostgreSQL and each issue holds a lock per wallet and per
 * client address, so the limits hold across instances and parallel requests.
 */
export class SelfServiceKeys {
  constructor(
    private readonly db: Database,
    private readonly keys: ApiKeys,
    readonly policy: SignupPolicy,
  ) {}

  /** 403 when the operator turned self-service sign-up off. */
  assertEnabled(): void {
    if (!this.policy.enabled) {
      throw new ApiError(
        403,
        'agent_signup_disabled',
        'This service does not issue keys to wallets (self-service sign-up is off). Ask the operator for an ' +
          'agent API key.',
      );
    }
  }

  /** A new key for this wallet, or 403 (sign-up off), 429 (too many this hour) or 409 (too many live keys). */
  async issue(address: string, ip: string, name: string, expiresAt?: Date): Promise<{ key: ApiKey; token: string }> {
    this.assertEnabled();
    return this.db.transaction(async (client) => {
      await client.query("SELECT pg_advisory_xact_lock(hashtextextended('signup wallet ' || $1, 0))", [address]);
      await client.query("SELECT pg_advisory_xact_lock(hashtextextended('signup ip ' || $1, 0))", [ip]);
      const {
        rows: [counts],
      } = await client.query<SignupCounts & Record<string, unknown>>(
        `
        WITH wallet AS (SELECT created_at, revoked_at, expires_at FROM api_keys WHERE wallet_address = $1),
             ip AS (SELECT created_at FROM api_keys WHERE created_from_ip = $2 AND created_at > now() - interval '1 hour')
        SELECT (SELECT count(*) FROM wallet WHERE created_at > now() - interval '1 hour')::int AS wallet_recent,
               (SELECT ceil(extract(epoch FROM min(created_at) + interval '1 hour' - now())) FROM wallet WHERE created_at > now() - interval '1 hour')::int AS wallet_wait,
               (SELECT count(*) FROM ip)::int AS ip_recent,
               (SELECT ceil(extract(epoch FROM min(created_at) + interval '1 hour' - now())) FROM ip)::int AS ip_wait,
               (SELECT count(*) FROM wallet WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()))::int AS wallet_live`,
        [address, ip],
      );
      const { keysPerWalletPerHour: perWallet, keysPerIpPerHour: perIp, liveKeysPerWallet: live } = this.policy;
      if (perWallet > 0 && counts.wallet_recent >= perWallet)
        throw tooMany(
          `This wallet got ${counts.wallet_recent} keys in the last hour (at most ${perWallet}).`,
          counts.wallet_wait,
        );
      if (perIp > 0 && counts.ip_recent >= perIp)
        throw tooMany(`Your address got ${counts.ip_recent} keys in the last hour (at most ${perIp}).`, counts.ip_wait);
      if (live > 0 && counts.wallet_live >= live) {
        throw new ApiError(
          409,
          'key_limit_reached',
          `This wallet holds ${counts.wallet_live} live keys (at most ${live}). Revoke one you no longer use ` +
            `with DELETE /keys/{key_id} (GET /keys lists them), or keep using one you have.`,
        );
      }
      return this.keys.create(name, { address, ip, expiresAt }, client);
    });
  }
}

function tooMany(reason: string, waitSeconds: number | null): ApiError {
  const wait = Math.max(1, waitSeconds ?? 1);
  return new ApiError(
    429,
    'signup_rate_limited',
    `${reason} Wait ${wait} s (Retry-After), or keep using a key you have (GET /keys lists them).`,
    { retryable: true, retryAfterSeconds: wait },
  );
}
