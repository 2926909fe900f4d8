/**
 * What a facilitator does wrong in production, on demand: a test hook of `agent-audio facilitator`
 * (FACILITATOR_FAULT), refused in production like the service's own test hooks.
 */
export type FacilitatorFault =
  /** Settles, but the transfer lands `landAfterMs` later; meanwhile settle answers 200 `settlement_pending` (the
   * official facilitator's shape when its receipt wait runs out). */
  | { kind: 'pending-200'; landAfterMs: number }
  /** The same, answered as HTTP 500 with that body (Coinbase CDP's shape). */
  | { kind: 'pending-500'; landAfterMs: number }
  /** Settles, then never answers. */
  | { kind: 'settle-hang' }
  /** Verify says valid, settle refuses without broadcasting anything. */
  | { kind: 'settle-refused' }
  /** Settle answers success with the transaction of an earlier, other transfer (or one that does not exist), and
   * broadcasts nothing. */
  | { kind: 'wrong-transaction' }
  /** /supported lists only another network. */
  | { kind: 'unsupported-network' }
  /** Every request is answered 503 for the first `forMs` after start. */
  | { kind: 'down'; forMs: number };

const withTime = new Set(['pending-200', 'pending-500', 'down']);
const plain = new Set(['settle-hang', 'settle-refused', 'wrong-transaction', 'unsupported-network']);

/** `kind` or `kind:MS`, e.g. `pending-200:2000`; throws a sentence naming the accepted forms. */
export function parseFacilitatorFault(text: string): FacilitatorFault {
  const [kind, ms, extra] = text.split(':');
  if (extra === undefined && plain.has(kind) && ms === undefined) return { kind } as FacilitatorFault;
  if (extra === undefined && withTime.has(kind) && ms !== undefined && /^[0-9]{1,7}$/.test(ms)) {
    return kind === 'down' ? { kind, forMs: Number(ms) } : ({ kind, landAfterMs: Number(ms) } as FacilitatorFault);
  }
  throw new Error(
    `one of ${[...plain].join(', ')}, or ${[...withTime].map((k) => `${k}:MS`).join(', ')} (got ${JSON.stringify(text)})`,
  );
}

/** How long a held settlement waits before its broadcast, for the faults that land late. */
export function landAfterMs(fault: FacilitatorFault | undefined): number | undefined {
  return fault && (fault.kind === 'pending-200' || fault.kind === 'pending-500') ? fault.landAfterMs : undefined;
}
