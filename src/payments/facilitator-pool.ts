import { AsyncLocalStorage } from 'node:async_hooks';
import type { FacilitatorClient } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements, SupportedResponse, VerifyResponse } from '@x402/core/types';

/** One facilitator of X402_FACILITATOR_URL: its address (what orders record) and its HTTP client. */
export interface PoolMember {
  url: string;
  client: FacilitatorClient;
}

/** What the pool knows of one facilitator, for health and the operator. */
export interface FacilitatorState {
  url: string;
  /** It listed our scheme and network at its last /supported and did not fail its last call. */
  ok: boolean;
  reason?: string;
  checked_at?: string;
}

/** Where one settlement may go, set by the order being settled (src/orders/advance.ts). */
export interface SettlementRoute {
  /** The facilitator this payment was sent to before: it is the only one it may go to now. */
  sentTo?: string | null;
  /** Called with the facilitator's address before the payment is sent to it (null: sent nowhere after all). */
  record?: (url: string | null) => Promise<void>;
}

/** No facilitator can take the call now: nothing was sent anywhere. */
export class NoFacilitator extends Error {}

interface Member extends PoolMember {
  supported?: SupportedResponse;
  /** Why it cannot be used (it does not list our network, /supported failed), or undefined. */
  unusable?: string;
  /** It failed a call (refused, 5xx, timeout) this recently: tried after the others, for `backoffMs`. */
  failedAt?: number;
  backoffMs?: number;
  checkedAt?: number;
  checking?: Promise<void>;
}

/** How long a facilitator that failed a verify is tried only after the others. */
const FAILED_BACKOFF_MS = 10_000;
/**
 * How long one whose settle failed (timeout, 5xx: outcome unknown) is: it may answer verify and /supported and still
 * hang every settlement; new payments go elsewhere meanwhile.
 */
const FAILED_SETTLE_BACKOFF_MS = 60_000;
/** Payments whose verifying facilitator is remembered, so that their settlement goes to the same one. */
const REMEMBERED_VERIFIERS = 2000;

/**
 * Several facilitators in the order the operator listed them (X402_FACILITATOR_URL, comma-separated), as one
 * FacilitatorClient. Verify goes to the first that answers: a refused connection, a 5xx, a timeout or a bad answer
 * passes it to the next. Settle goes to the facilitator that verified the payment (else the first usable one) and
 * moves on only when the connection was refused (nothing was sent). A settlement whose outcome is unknown at one
 * facilitator (timeout, 5xx, settlement_pending) is recorded on its order and is only ever sent again to that one
 * (`route`): until the chain says, another facilitator could broadcast the same authorization.
 * /supported of each is read at start and every `refreshMs`, sooner while one fails or none lists our network; one
 * that lacks our network is skipped, with a log line when that changes.
 */
export class FacilitatorPool implements FacilitatorClient {
  private readonly members: Member[];
  private readonly routes = new AsyncLocalStorage<SettlementRoute>();
  private readonly verifiers = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private timerDueAt = 0;
  private closed = false;
  private readonly watchers: Array<() => void> = [];

  constructor(
    members: PoolMember[],
    private readonly kind: { scheme: string; network: string },
    private readonly log: (fields: Record<string, unknown>, message: string) => void,
    private readonly options: { refreshMs: number; retryMs: number } = { refreshMs: 60_000, retryMs: 5_000 },
  ) {
    if (!members.length) throw new Error('a facilitator pool needs one facilitator at least');
    this.members = members.map((m) => ({ ...m }));
  }

  /** Reads every facilitator's /supported now (in parallel; one read at a time per facilitator). */
  async refresh(): Promise<void> {
    await Promise.all(this.members.map((m) => this.check(m)));
    this.schedule();
    this.changed();
  }

  /** `watcher` runs whenever what the pool knows may have changed (a /supported read, a failed call). */
  watch(watcher: () => void): void {
    this.watchers.push(watcher);
  }

  /** Each facilitator as the pool last saw it. */
  states(): FacilitatorState[] {
    return this.members.map((m) => ({
      url: m.url,
      ok: !m.unusable && m.supported !== undefined && !this.recentlyFailed(m),
      ...((m.unusable || this.recentlyFailed(m)) && { reason: m.unusable ?? 'its last call failed' }),
      ...(m.checkedAt && { checked_at: new Date(m.checkedAt).toISOString() }),
    }));
  }

  /**
   * Why no order can be paid now, or undefined when a facilitator lists our network. Said to agents too: the
   * facilitators are named by their place in the list, never by address (states() has the addresses).
   */
  unavailableReason(): string | undefined {
    if (this.members.some((m) => m.supported && !m.unusable)) return undefined;
    const name = (i: number) =>
      this.members.length > 1 ? `facilitator ${i + 1} of ${this.members.length}` : 'the facilitator';
    const each = this.members.map((m, i) => `${name(i)}: ${m.unusable ?? 'not asked yet'}`);
    return `no facilitator can take payments in ${this.kind.scheme} on ${this.kind.network} (${each.join('; ')})`;
  }

  /** Runs `settle` with this order's route: the facilitator it was sent to before, and how to record a new one. */
  routed<T>(route: SettlementRoute, settle: () => Promise<T>): Promise<T> {
    return this.routes.run(route, settle);
  }

  /** Our scheme and network as the usable facilitators list them; read again when none does. */
  async getSupported(): Promise<SupportedResponse> {
    if (this.members.every((m) => m.checkedAt === undefined) || !this.usable().length) await this.refresh();
    const usable = this.usable();
    const kinds = usable.flatMap((m) => m.supported!.kinds);
    return {
      kinds,
      extensions: [...new Set(usable.flatMap((m) => m.supported!.extensions ?? []))],
      signers: Object.assign({}, ...usable.reverse().map((m) => m.supported!.signers ?? {})),
    } as SupportedResponse;
  }

  async verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<VerifyResponse> {
    const candidates = await this.candidates();
    let lastError: unknown;
    for (const member of candidates) {
      try {
        const answer = await member.client.verify(payload, requirements);
        this.succeeded(member);
        this.rememberVerifier(payload, member.url);
        return answer;
      } catch (e) {
        // A refusal carried in an HTTP error (400 with isValid: false) is an answer, not a failure.
        if (statusOf(e) !== undefined && statusOf(e)! < 500) throw e;
        lastError = e;
        this.failed(member, 'verify', e);
      }
    }
    throw lastError ?? new NoFacilitator(this.unavailableReason() ?? 'no facilitator answered');
  }

  async settle(payload: PaymentPayload, requirements: PaymentRequirements) {
    const route = this.routes.getStore() ?? {};
    if (route.sentTo) {
      const member = this.members.find((m) => m.url === route.sentTo);
      if (!member) {
        throw new NoFacilitator(
          'this payment was sent to a facilitator that is no longer configured: only the chain can tell its outcome now',
        );
      }
      return this.settleAt(member, payload, requirements);
    }
    const verifier = this.verifiers.get(paymentKey(payload));
    const candidates = await this.candidates();
    const first = candidates.find((m) => m.url === verifier);
    const ordered = first ? [first, ...candidates.filter((m) => m !== first)] : candidates;
    let lastError: unknown;
    for (const member of ordered) {
      await route.record?.(member.url);
      try {
        return await this.settleAt(member, payload, requirements);
      } catch (e) {
        // Only a connection never made proves the payment did not reach it: anything else may have broadcast it.
        if (!neverConnected(e)) throw e;
        lastError = e;
      }
    }
    await route.record?.(null);
    throw lastError ?? new NoFacilitator(this.unavailableReason() ?? 'no facilitator answered');
  }

  /** Stops the refresh timer. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private async settleAt(member: Member, payload: PaymentPayload, requirements: PaymentRequirements) {
    try {
      const answer = await member.client.settle(payload, requirements);
      this.succeeded(member);
      return answer;
    } catch (e) {
      if (statusOf(e) === undefined || statusOf(e)! >= 500) this.failed(member, 'settle', e);
      throw e;
    }
  }

  /** Usable facilitators in the operator's order, those that failed a call lately last; read again when none is. */
  private async candidates(): Promise<Member[]> {
    if (!this.usable().length) await this.refresh();
    const usable = this.usable();
    if (!usable.length) throw new NoFacilitator(this.unavailableReason()!);
    return [...usable.filter((m) => !this.recentlyFailed(m)), ...usable.filter((m) => this.recentlyFailed(m))];
  }

  private usable(): Member[] {
    return this.members.filter((m) => m.supported && !m.unusable);
  }

  private recentlyFailed(m: Member): boolean {
    return m.failedAt !== undefined && Date.now() - m.failedAt < (m.backoffMs ?? FAILED_BACKOFF_MS);
  }

  private check(member: Member): Promise<void> {
    member.checking ??= member.client
      .getSupported()
      .then(
        (supported) => {
          const listed = supported.kinds.some(
            (k) => k.x402Version === 2 && k.scheme === this.kind.scheme && k.network === this.kind.network,
          );
          const networks = [...new Set(supported.kinds.map((k) => `${k.scheme} on ${k.network}`))].join(', ');
          this.mark(
            member,
            listed
              ? undefined
              : `its /supported does not list ${this.kind.scheme} on ${this.kind.network} (it lists ${networks || 'nothing'})`,
          );
          member.supported = supported;
        },
        (e: unknown) => this.mark(member, `its /supported did not answer: ${messageOf(e)}`),
      )
      .finally(() => {
        member.checkedAt = Date.now();
        member.checking = undefined;
      });
    return member.checking;
  }

  private mark(member: Member, unusable: string | undefined): void {
    if (unusable !== member.unusable || member.checkedAt === undefined) {
      if (unusable) this.log({ facilitator: member.url, reason: unusable }, 'facilitator skipped');
      else this.log({ facilitator: member.url }, 'facilitator usable');
    }
    member.unusable = unusable;
  }

  private succeeded(member: Member): void {
    member.failedAt = undefined;
  }

  private failed(member: Member, call: string, e: unknown): void {
    if (!this.recentlyFailed(member)) {
      this.log({ facilitator: member.url, call, err: messageOf(e) }, 'facilitator call failed; the next one is tried');
    }
    member.failedAt = Date.now();
    member.backoffMs = call === 'settle' ? FAILED_SETTLE_BACKOFF_MS : FAILED_BACKOFF_MS;
    // Its /supported is read again soon: health and /availability say so if it is down.
    this.schedule(this.options.retryMs);
    this.changed();
  }

  private changed(): void {
    for (const watcher of this.watchers) watcher();
  }

  private rememberVerifier(payload: PaymentPayload, url: string): void {
    if (this.verifiers.size >= REMEMBERED_VERIFIERS) this.verifiers.delete(this.verifiers.keys().next().value!);
    this.verifiers.set(paymentKey(payload), url);
  }

  /** The next read of /supported: soon while none is usable or one fails, else after refreshMs (or `inMs`). */
  private schedule(inMs?: number): void {
    if (this.closed) return;
    const troubled = !this.usable().length || this.members.some((m) => m.unusable || this.recentlyFailed(m));
    const delay = inMs ?? (troubled ? this.options.retryMs : this.options.refreshMs);
    if (inMs !== undefined && this.timer && this.timerDueAt <= Date.now() + delay) return;
    clearTimeout(this.timer);
    this.timerDueAt = Date.now() + delay;
    this.timer = setTimeout(() => void this.refresh().catch(() => undefined), delay);
    this.timer.unref();
  }
}

function paymentKey(payload: PaymentPayload): string {
  const authorization = (payload.payload as { authorization?: { from?: string; nonce?: string } }).authorization;
  return `${authorization?.from?.toLowerCase()}:${authorization?.nonce}`;
}

/** The HTTP status of a facilitator's error answer (VerifyError, SettleError), if it was one. */
function statusOf(e: unknown): number | undefined {
  const status = (e as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number') return status;
  const found = /failed \((\d{3})\)/.exec(messageOf(e));
  return found ? Number(found[1]) : undefined;
}

/** The request never reached the facilitator: no connection was made (refused, no such host). */
function neverConnected(e: unknown): boolean {
  const codes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
  const seen = new Set<unknown>();
  const visit = (x: unknown): boolean => {
    if (!x || typeof x !== 'object' || seen.has(x)) return false;
    seen.add(x);
    const { code, cause, errors } = x as { code?: unknown; cause?: unknown; errors?: unknown };
    if (typeof code === 'string' && codes.has(code)) return true;
    return visit(cause) || (Array.isArray(errors) && errors.some(visit));
  };
  return visit(e);
}

function messageOf(e: unknown): string {
  const error = e as Error & { cause?: { code?: string } };
  const detail = error?.cause?.code ? ` (${error.cause.code})` : '';
  return `${String(error?.message ?? e)
    .split('\n')[0]
    .slice(0, 200)}${detail}`;
}
