import type { PaymentPayload } from '@x402/core/types';

/**
 * A payment as a sale reads it, whatever its scheme: who pays, how much, what the scheme spends once per payer, until
 * when it can be settled, and the payload as sent (the proof the facilitator verifies and settles, kept on the order).
 * Only payments/ reads a scheme's own fields; for x402 "exact" on EVM they are an EIP-3009 authorization.
 */
export interface SentPayment {
  payload: PaymentPayload;
  /** The paying address, as signed. */
  payer: string;
  amountAtomic: string;
  /** What the payer can spend only once (an EIP-3009 nonce): one payment, one order. */
  reference: string;
  /** Unix seconds from which it can no longer be settled. */
  validUntil: string;
}

interface Eip3009Authorization {
  from: string;
  value: string;
  validBefore: string;
  nonce: string;
}

/** The exact EVM scheme's payload read as a sent payment (its shape already checked: isExactEvmPayment). */
export function sentExactEvmPayment(payload: PaymentPayload): SentPayment {
  const { authorization } = payload.payload as { authorization: Eip3009Authorization };
  return {
    payload,
    payer: authorization.from,
    amountAtomic: authorization.value,
    reference: authorization.nonce,
    validUntil: String(authorization.validBefore),
  };
}
