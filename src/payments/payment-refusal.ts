import type { ApiError } from '../errors/index.js';
import type { PaymentRequirements } from './payment-gateway.js';
import type { SentPayment } from './sent-payment.js';

/**
 * What the seller asks for one sale: the terms a payment must accept (opaque outside payments/), their amount, and how
 * to refuse with them (an ApiError carrying PAYMENT-REQUIRED, the terms again).
 */
export interface Offer {
  requirements: PaymentRequirements;
  amountAtomic: string;
  paymentRequired: (code: string, message: string, status?: number) => Promise<ApiError>;
}

/** A payment the facilitator vouched for; its proof is searched on the chain from claimBlock. */
export interface VerifiedPayment extends SentPayment {
  claimBlock: bigint;
}

/**
 * Why a payment cannot pay for an offer, whatever its scheme and transport: the caller words it for its agent (each
 * becomes a 402 with the offer's PAYMENT-REQUIRED). Nothing was charged for any of them.
 */
export type PaymentRefusal =
  /** No payment was sent. */
  | { refused: 'missing' }
  /** What was sent is not a payment of a scheme this service takes. */
  | { refused: 'unreadable' }
  /** It accepted other terms (amount, asset, payee, network, scheme) than the offer's. */
  | { refused: 'other_terms' }
  /** It was made out for another operation than the one asked. */
  | { refused: 'wrong_resource'; paidFor?: string; asked: string }
  /** It stays valid longer than the service accepts. */
  | { refused: 'valid_too_long'; validUntil: string; maxTimeoutSeconds: number; slackSeconds: number; latest: bigint }
  /** It cannot be valid, as far as can be said without the facilitator (a signature not by its payer, say). */
  | { refused: 'cannot_be_valid'; reason: string }
  /** The facilitator found it invalid. */
  | { refused: 'rejected'; reason: string; message?: string };

export function isRefusal<T extends object>(value: T | PaymentRefusal): value is PaymentRefusal {
  return 'refused' in value;
}
