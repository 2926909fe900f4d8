import type { Address, Hex } from 'viem';
import { ApiError } from '../errors/index.js';

/** The two reads a signature check may need from the node. */
export interface ChainNode {
  getCode(address: Address): Promise<Hex | undefined>;
  call(request: { to?: Address; data: Hex; gas: bigint }): Promise<Hex | undefined>;
}

export interface ChainCheckLimits {
  /** Chain reads on behalf of one address per minute. */
  perAddressPerMinute: number;
  /** Chain reads for signature checks per minute on this instance, whatever the addresses. */
  globalPerMinute: number;
  /** How long whether an address has code is remembered. */
  codeCacheMs: number;
  /** The gas any eth_call of a check may use (a wallet contract runs with at most this). */
  gasCap: bigint;
}

export const DEFAULT_CHAIN_CHECK_LIMITS: ChainCheckLimits = {
  perAddressPerMinute: 10,
  globalPerMinute: 120,
  codeCacheMs: 30_000,
  gasCap: 500_000n,
};

const WINDOW_MS = 60_000;
const MAX_REMEMBERED = 10_000;

/**
 * The chain reads that checking a signature may need (is there code at an address? does a wallet contract accept a
 * signature?), for callers who have not paid anything yet: a code lookup is remembered a while, every read counts
 * against a budget per address and per instance (429 beyond it), and every eth_call has a gas cap — so a flood of
 * forged signatures cannot spend the RPC quota nor make the node run a caller's contract code at length.
 */
export class ChainChecks {
  private readonly code = new Map<string, { has: boolean; until: number }>();
  private readonly all: MinuteLog;
  private readonly byAddress = new Map<string, MinuteLog>();

  constructor(
    private readonly node: ChainNode,
    readonly limits: ChainCheckLimits = DEFAULT_CHAIN_CHECK_LIMITS,
  ) {
    this.all = new MinuteLog(limits.globalPerMinute);
  }

  /** Whether the address holds contract code (a smart wallet), from the cache when it was asked recently. */
  async hasCode(address: Address): Promise<boolean> {
    const key = address.toLowerCase();
    const known = this.code.get(key);
    if (known && known.until > Date.now()) return known.has;
    this.spend(key);
    const code = await this.node.getCode(address).catch((e: unknown) => {
      throw unreachable(e);
    });
    if (this.code.size >= MAX_REMEMBERED) this.code.clear();
    const has = Boolean(code && code !== '0x');
    this.code.set(key, { has, until: Date.now() + this.limits.codeCacheMs });
    return has;
  }

  /** An eth_call made on behalf of `address`, its gas capped; undefined when it reverts or runs out of gas. */
  async call(address: Address, request: { to?: Address; data: Hex }): Promise<Hex | undefined> {
    this.spend(address.toLowerCase());
    return this.node.call({ ...request, gas: this.limits.gasCap }).catch(() => undefined);
  }

  /** Counts a read against both budgets, each over the last 60 s (a fixed minute would allow twice as many across its end). */
  private spend(address: string): void {
    const now = Date.now();
    const { perAddressPerMinute: perAddress, globalPerMinute: global } = this.limits;
    const mine = this.byAddress.get(address) ?? new MinuteLog(perAddress);
    const addressWait = mine.waitMs(now);
    if (addressWait > 0)
      throw busy(
        `This address needed ${perAddress} on-chain signature checks in the last minute (at most ${perAddress}).`,
        addressWait,
      );
    const globalWait = this.all.waitMs(now);
    if (globalWait > 0)
      throw busy(`This service made its ${global} on-chain signature checks of the last minute.`, globalWait);
    this.all.add(now);
    mine.add(now);
    if (!this.byAddress.has(address) && this.roomForAnother(now)) this.byAddress.set(address, mine);
  }

  /** Whether one more address can be tracked: those with no read in the last minute are forgotten first. */
  private roomForAnother(now: number): boolean {
    if (this.byAddress.size < MAX_REMEMBERED) return true;
    for (const [key, log] of this.byAddress) if (log.waitMs(now) === 0 && log.isEmpty()) this.byAddress.delete(key);
    return this.byAddress.size < MAX_REMEMBERED;
  }
}

/** The times of the reads of the last 60 s, oldest first: one more fits while fewer than `limit` are kept. */
class MinuteLog {
  private readonly times: number[] = [];

  constructor(private readonly limit: number) {}

  /** 0 when one more read fits now, else how long until the oldest leaves the minute (ms). */
  waitMs(now: number): number {
    while (this.times.length && this.times[0] <= now - WINDOW_MS) this.times.shift();
    return this.times.length < this.limit ? 0 : this.times[0] + WINDOW_MS - now;
  }

  add(now: number): void {
    this.times.push(now);
  }

  isEmpty(): boolean {
    return this.times.length === 0;
  }
}

function busy(reason: string, waitMs: number): ApiError {
  const wait = Math.max(1, Math.ceil(waitMs / 1000));
  const message =
    `${reason} Signatures by plain wallets (EOA) are checked without the chain; a smart-wallet signature ` +
    `needs the chain. Wait ${wait} s (Retry-After) and sign a fresh challenge or payment.`;
  return new ApiError(429, 'chain_checks_busy', message, { retryable: true, retryAfterSeconds: wait });
}

function unreachable(cause: unknown): ApiError {
  const message =
    `The chain did not answer (${(cause as Error).message?.split('\n')[0].slice(0, 200)}), so a smart-wallet ` +
    'signature cannot be checked now. Retry in a few seconds with a fresh signature.';
  return new ApiError(503, 'chain_unavailable', message, { retryable: true, retryAfterSeconds: 5 });
}
