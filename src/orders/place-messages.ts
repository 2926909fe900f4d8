import { AUTHORIZATION_FIELDS, type PaymentRequirements } from '../payments/index.js';
import { atomicToAmount } from '../rules/index.js';

/** The scheme's names for an authorization's expiry and its one-time reference (payments/ knows the scheme). */
const { expiry, reference } = AUTHORIZATION_FIELDS;

/** The official x402 client refuses to pay more than this (atomic USDC) unless its spend controls are raised. */
const CLIENT_DEFAULT_CAP_ATOMIC = 1_000_000n;

/** What POST /orders (and every paid operation) tells an agent, by situation; each says what to do next. */
export const placeMessages = {
  payFirst: (amountAtomic: string) =>
    `Pay ${atomicToAmount(amountAtomic, 6)} USDC (${amountAtomic} atomic units) as described in the PAYMENT-REQUIRED header, then send this same request again, with the same Idempotency-Key, adding PAYMENT-SIGNATURE. Nothing has been ordered yet.${aboveClientCap(amountAtomic)}`,
  notAPayment:
    'PAYMENT-SIGNATURE is not a Base64-encoded x402 v2 payment payload. Build it from the PAYMENT-REQUIRED header of this answer with an x402 client and retry.',
  otherTerms: (amountAtomic: string, requirements: PaymentRequirements) =>
    `The payment accepted other terms than this request costs now (${amountAtomic} atomic USDC to ${requirements.payTo} on ${requirements.network}). Pay exactly the requirements in this PAYMENT-REQUIRED header and retry with the same Idempotency-Key.`,
  wrongResource: (paidFor: unknown, resourceUrl: string) =>
    `The payment was made out for ${describeResource(paidFor)}, not for ${resourceUrl}, the resource this request is sold as. Nothing was charged. Sign a new payment for the resource named in this PAYMENT-REQUIRED header (resource.url) and retry with the same Idempotency-Key.`,
  validTooLong: (validUntil: string, maxTimeoutSeconds: number, slackSeconds: number, latestAccepted: bigint) =>
    `The payment authorization is valid until ${validUntil}, later than this service accepts (now + maxTimeoutSeconds ${maxTimeoutSeconds} s + ${slackSeconds} s clock slack = ${latestAccepted}). Nothing was charged. Sign a new payment whose ${expiry} is at most now + ${maxTimeoutSeconds} seconds and retry with the same Idempotency-Key.`,
  cannotBeValid: (refusal: string) =>
    `The payment cannot be valid: ${refusal}. Nothing was charged. Sign a new payment for the requirements in this PAYMENT-REQUIRED header with the wallet it names as from, and retry with the same Idempotency-Key.`,
  refused: (reason: string, message?: string) =>
    `The payment was refused (${reason}${message ? `: ${message}` : ''}). Nothing was charged. Sign a new payment for the requirements in this PAYMENT-REQUIRED header and retry with the same Idempotency-Key.`,
  /** The payment was not taken: why, and what to do. */
  notTaken: (failure: string) =>
    `The payment was not taken (${failure}). Nothing was charged and nothing was ordered. Sign a new payment (a new authorization) for the requirements in this PAYMENT-REQUIRED header and retry with the same Idempotency-Key.`,
  paymentAlreadyUsed: `This payment authorization already paid for another order. Sign a new payment (new ${reference}) for this request.`,
  upgradeInProgress:
    'Another upgrade of this service is being paid right now; nothing was charged for this one. Read the service (GET /services/{service_id}) in a moment and ask again if it still needs an upgrade.',
  extensionInProgress:
    'Another extension of this service is being paid right now; nothing was charged for this one. Read the service (GET /services/{service_id}) in a moment and extend again if it still needs more time.',
  paymentIdInvalid: (why: string) =>
    `The payment-identifier in your payment payload is not valid: ${why}. Nothing was charged. Sign the payment again with the extension as PAYMENT-REQUIRED declares it and a valid id (generatePaymentId() of @x402/extensions/payment-identifier), or without one.`,
  paymentIdConflict: (order: { id: string; payment_id?: string | null }) =>
    `The payment-identifier ${String(order.payment_id)} already belongs to order ${order.id}, paid with another payment payload or for another request. Nothing was charged. Use a new id (generatePaymentId()) for a new purchase, or resend exactly the original payload and body to get that order back.`,
  keyReused:
    'This Idempotency-Key already belongs to an order with a different body. Use a new Idempotency-Key for a new order, or repeat the original body to get that order back.',
  earlierAttemptFailed: 'The earlier attempt with this key failed without charging; retry now with a new payment.',
  stillInProgress:
    'An order with this Idempotency-Key is still being paid or provisioned. Retry this same request in a moment to get it; you will not be charged twice.',
  keyReleased: 'Another request with this Idempotency-Key just finished without charging. Retry this same request.',
  serviceStopped:
    'The service was stopped by its owner while this payment was being settled. The payment was taken and is refunded in full automatically (GET /orders/{order_id} shows the refund); nothing was changed.',
  settlementPending: (orderId: string, why: string, validUntil?: string) =>
    `The payment for order ${orderId} is being settled but its outcome is not known yet (${why}). Do not sign a new payment: you will not be charged twice. Retry this same request with the same PAYMENT-SIGNATURE and Idempotency-Key in a few seconds, or read GET /orders/${orderId}. ${untilExpiry(validUntil)}`,
};

/** When the outcome is known at the latest: the transfer shows on chain, or the authorization expires unused. */
function untilExpiry(validUntil?: string): string {
  const when = validUntil ? new Date(Number(validUntil) * 1000).toISOString() : `its ${expiry}`;
  return `It is known at the latest once the authorization expires (${when}): either the transfer shows on chain and the order is delivered (or refunded in full), or nothing was charged and the answer says so.`;
}

/** The 402's warning when the official x402 client would refuse this amount with its default spend cap. */
function aboveClientCap(amountAtomic: string): string {
  if (BigInt(amountAtomic) <= CLIENT_DEFAULT_CAP_ATOMIC) return '';
  return ` Note: the official x402 client (@x402/fetch, @x402/axios, x402Client) refuses any payment above 1 USDC by default (maxAmountPerPayment); raise it first, e.g. client.setSpendControls({ maxAmountPerPayment: '$${atomicToAmount(amountAtomic, 6)}' }).`;
}

/** A payload's resource.url as an error message quotes it (the agent's own text, cut short). */
function describeResource(url: unknown): string {
  return typeof url === 'string' && url.length > 0
    ? JSON.stringify(url.slice(0, 200))
    : 'no resource (resource.url is missing)';
}
