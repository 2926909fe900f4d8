import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { limitKey } from '../transport/index.js';

export interface RateLimits {
  /** Requests per second allowed to one client address (0: no limit); bursts up to twice that. */
  perIp: number;
  /** Requests per second allowed to one API key (0: no limit); bursts up to twice that. */
  perKey: number;
}

class Buckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly rate: number) {}

  /** Seconds to wait before this key may ask again, 0 when it may go now. */
  take(key: string, now: number): number {
    const burst = this.rate * 2;
    const bucket = this.buckets.get(key) ?? { tokens: burst, at: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * this.rate);
    bucket.at = now;
    if (this.buckets.size > 100_000) this.buckets.clear();
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil((1 - bucket.tokens) / this.rate);
  }
}

/**
 * Token buckets per client address (an IPv6 client by its /64, see limitKey) and per API key (the bearer token as sent,
 * before it is checked), in this
 * instance's memory: with N instances behind one address a client gets up to N times the rate.
 */
export class RateLimiter {
  private readonly byIp: Buckets | undefined;
  private readonly byKey: Buckets | undefined;

  constructor(limits: RateLimits) {
    this.byIp = limits.perIp > 0 ? new Buckets(limits.perIp) : undefined;
    this.byKey = limits.perKey > 0 ? new Buckets(limits.perKey) : undefined;
  }

  /** Seconds this caller must wait, 0 when it may go now (and then the request is counted). */
  wait(address: string, authorization: string | undefined, now = Date.now()): number {
    const token = authorization && this.byKey ? /^Bearer +(\S{1,200})/i.exec(authorization)?.[1] : undefined;
    return Math.max(this.byIp?.take(limitKey(address), now) ?? 0, token ? this.byKey!.take(token, now) : 0);
  }

  /** Throws the 429 to answer when the caller is over its rate. */
  check(ctx: Context): void {
    const wait = this.wait(ctx.ip, ctx.get('Authorization'));
    if (wait > 0) {
      throw new ApiError(
        429,
        'rate_limited',
        `Too many requests. Wait ${wait} s (Retry-After) and retry the same request; reuse the same ` +
          `Idempotency-Key for orders.`,
        { retryable: true, retryAfterSeconds: wait },
      );
    }
  }
}

/** The limiter, or none when both rates are 0 (no limit). */
export function rateLimiter(limits: RateLimits | undefined): RateLimiter | undefined {
  return limits && (limits.perIp > 0 || limits.perKey > 0) ? new RateLimiter(limits) : undefined;
}
