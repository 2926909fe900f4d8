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
  /** The same, with the `paymentId` to poll that Circle's facilitator adds to its 200 `settlement_pending`. */
  | { kind: 'pending-circle'; landAfterMs: number }
  /** The same, answered as HTTP 202 `{paymentId, status: "pending"}` without a settle result (Circle's older shape). */
  | { kind: 'pending-202'; landAfterMs: number }
  /** The transfer lands `landAfterMs` later and settle waits for its receipt (30 s at most), then answers success:
   * a settle slower than the service's patience, which recovery sends again while the first is still waiting. */
  | { kind: 'slow-settle'; landAfterMs: number }
  /** Settles, then never answers. */
  | { kind: 'settle-hang' }
  /** Verify says valid, settle refuses without broadcasting anything. */
  | { kind: 'settle-refused' }
  /** Settle answers success with the hash of another transfer (`transaction`, else its own last one, else a hash
   * that exists nowhere), and broadcasts nothing. */
  | { kind: 'wrong-transaction'; transaction?: string }
  /** /supported lists only another network. */
  | { kind: 'unsupported-network' }
  /** Every request is answered 503 for the first `forMs` after start. */
  | { kind: 'down'; forMs: number };

const landing = new Set(['pending-200', 'pending-500', 'pending-circle', 'pending-202', 'slow-settle']);
const withTime = new Set([...landing, 'down']);
const plain = new Set(['settle-hang', 'settle-refused', 'wrong-transaction', 'unsupported-network']);

/** `kind`, `kind:MS` (e.g. `pending-200:2000`) or `wrong-transaction:0xHASH`; throws a sentence naming the forms. */
export function parseFacilitatorFault(text: string): FacilitatorFault {
  const [kind, value, extra] = text.split(':');
  if (extra === undefined && plain.has(kind) && value === undefined) return { kind } as FacilitatorFault;
  if (extra === undefined && kind === 'wrong-transaction' && /^0x[0-9a-fA-F]{64}$/.test(value ?? '')) {
    return { kind, transaction: value };
  }
  if (extra === undefined && withTime.has(kind) && value !== undefined && /^[0-9]{1,7}$/.test(value)) {
    return kind === 'down'
      ? { kind, forMs: Number(value) }
      : ({ kind, landAfterMs: Number(value) } as FacilitatorFault);
  }
  throw new Error(
    `one of ${[...plain].join(', ')}, wrong-transaction:0xHASH, or ${[...withTime].map((k) => `${k}:MS`).join(', ')} (got ${JSON.stringify(text)})`,
  );
}

/** How long a held settlement waits before its broadcast, for the faults that land late. */
export function landAfterMs(fault: FacilitatorFault | undefined): number | undefined {
  return fault && 'landAfterMs' in fault ? fault.landAfterMs : undefined;
}

/** How long settle waits for a receipt: past it, the official facilitator answers `settlement_pending`. */
export function receiptWaitMs(fault: FacilitatorFault | undefined): number | undefined {
  if (fault?.kind === 'slow-settle') return 30_000;
  return landAfterMs(fault) !== undefined ? 200 : undefined;
}
