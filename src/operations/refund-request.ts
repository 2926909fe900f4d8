import { ApiError } from '../errors/index.js';
import {
  refundRequestDigest,
  refundRequestSigner,
  type RecordedRefundRequest,
  type RefundRequest,
  type RequestedPayment,
  type Refunds,
} from '../refunds/index.js';
import type { ServiceRow } from '../services/index.js';
import type { OperationDeps } from './operation-deps.js';
import { stopNotAvailable } from './refusals.js';
import { refundAnswer, type RefundAnswer, type DenialReason } from './refund-request-answer.js';

export type { RefundAnswer } from './refund-request-answer.js';

type Decision =
  | { denial: DenialReason; message: string; payer?: string; payment?: RequestedPayment }
  | { refundId: string; payer: string; payment: RequestedPayment };

/**
 * A refund request in the form of x402's proposed refund extension: a payment's payer asks for its money back. It is
 * the owner's stop (POST /services/{id}/stop) of the service the payment bought, and its answer is that stop's refund
 * (what rules/refunds.json gives back, whatever amount was asked). The same idempotency key answers the same request
 * the same way; a pending refund is answered executed once it is proven sent.
 */
export async function requestRefund(deps: OperationDeps, request: RefundRequest): Promise<RefundAnswer> {
  const refunds = deps.refunds;
  if (!refunds) throw stopNotAvailable();
  const digest = refundRequestDigest(request);
  const known = await refunds.requests.recorded(request.idempotencyKey);
  if (known) return refundAnswer(refunds, sameRequest(known, digest), true);
  const decision = await decide(deps, refunds, request);
  const recorded = await refunds.requests.record({
    idempotency_key: request.idempotencyKey,
    request_digest: digest,
    payer: decision.payer ?? null,
    order_id: decision.payment?.order_id ?? null,
    service_id: decision.payment?.service_id ?? null,
    refund_id: 'refundId' in decision ? decision.refundId : null,
    amount_atomic: request.amount,
    denial_reason: 'denial' in decision ? decision.denial : null,
    denial_message: 'denial' in decision ? decision.message : null,
  });
  return refundAnswer(refunds, sameRequest(recorded, digest), false);
}

/** The answer already given under this key, if it was given to this very request. */
export async function recordedRefund(deps: OperationDeps, idempotencyKey: string): Promise<RefundAnswer> {
  if (!deps.refunds) throw stopNotAvailable();
  const known = await deps.refunds.requests.recorded(idempotencyKey);
  if (!known) {
    throw new ApiError(
      404,
      'refund_request_not_found',
      'No refund request was made with this idempotencyKey. POST the signed request to this endpoint without the key in the path.',
    );
  }
  return refundAnswer(deps.refunds, known, true);
}

function sameRequest(known: RecordedRefundRequest, digest: string): RecordedRefundRequest {
  if (known.request_digest === digest) return known;
  throw new ApiError(
    409,
    'idempotency_key_reused',
    'This idempotencyKey was used for another refund request. Use a new key (a new UUID) for a new request, or send the first request again unchanged to read its answer.',
  );
}

async function decide(deps: OperationDeps, refunds: Refunds, request: RefundRequest): Promise<Decision> {
  const { txHash, network, paymentId } = request.paymentReference;
  const payment = await refunds.requests.payment(txHash);
  if (!payment || payment.network !== network || (paymentId !== undefined && paymentId !== payment.payment_id)) {
    return {
      denial: 'unknown_payment',
      message: `No payment to this service was settled by transaction ${txHash} on ${network}${paymentId ? ` with paymentId ${paymentId}` : ''}. Name the settlement transaction of PAYMENT-RESPONSE.`,
    };
  }
  const signer = await refundRequestSigner(request);
  if (!signer || signer.toLowerCase() !== payment.payer.toLowerCase()) {
    return {
      denial: 'not_payer',
      payment,
      message: `The payerSignature ${signer ? `was made by ${signer}, not by` : 'does not recover to'} the wallet that made this payment. Sign the request's EIP-712 typed data (docs/api.md) with the paying wallet. Nothing was refunded.`,
    };
  }
  const refused = requestRefusal(request, payment);
  if (refused) return { ...refused, payer: payment.payer, payment };
  const decided = await refundFor(deps, refunds, payment);
  return { ...decided, payer: payment.payer, payment };
}

/** What the request itself asks for that we do not do. */
function requestRefusal(
  request: RefundRequest,
  payment: RequestedPayment,
): { denial: DenialReason; message: string } | undefined {
  if (request.validBefore && request.validBefore * 1000 <= Date.now()) {
    return {
      denial: 'policy_denied',
      message: `This refund request expired at ${new Date(request.validBefore * 1000).toISOString()} (validBefore). Sign a new one with a new idempotencyKey.`,
    };
  }
  if (request.refundTo && request.refundTo.toLowerCase() !== payment.payer.toLowerCase()) {
    return {
      denial: 'policy_denied',
      message: `Refunds go back to the wallet that paid (${payment.payer}), never elsewhere. Leave refundTo out or set it to the payer.`,
    };
  }
  if (BigInt(request.amount) > BigInt(payment.amount_atomic)) {
    return {
      denial: 'amount_exceeds_settled',
      message: `The payment settled ${payment.amount_atomic} atomic units; a refund request cannot ask for more (${request.amount}). The refund is the unused share the stop computes.`,
    };
  }
  return undefined;
}

/** The refund that answers the request: the stop's, or an undelivered order's refund in full. */
async function refundFor(
  deps: OperationDeps,
  refunds: Refunds,
  payment: RequestedPayment,
): Promise<{ refundId: string } | { denial: DenialReason; message: string }> {
  if (payment.state !== 'active') {
    const [failed] = await refunds.ofOrder(payment.order_id);
    if (failed) return { refundId: failed.id };
    throw new ApiError(
      409,
      'payment_not_delivered_yet',
      'This payment is still being settled or provisioned; an order not delivered is refunded in full by itself. Send the same request again in a minute.',
      { retryable: true, retryAfterSeconds: 30 },
    );
  }
  const service = payment.service_id ? await deps.services?.byId(payment.service_id) : undefined;
  if (!service) throw stopNotAvailable();
  const owned = await deps.services!.paidBy(payment.payer.toLowerCase(), service.id);
  if (!owned) {
    return {
      denial: 'policy_denied',
      message: `Stopping service ${service.id} is for its owner: the API key that ordered it or the wallet that paid its order. This payment's wallet paid an extension or upgrade only; ask the owner to stop it.`,
    };
  }
  return stopFor(refunds, service);
}

async function stopFor(
  refunds: Refunds,
  service: ServiceRow,
): Promise<{ refundId: string } | { denial: DenialReason; message: string }> {
  const stopped = await refunds.ofService(service.id);
  if (stopped) return { refundId: stopped.refund.id };
  const over = service.expires_at !== null && service.expires_at.getTime() <= Date.now();
  const outside = {
    denial: 'outside_window' as const,
    message: `Service ${service.id} is no longer running (${service.status}${over ? `, its paid time ended at ${service.expires_at!.toISOString()}` : ''}): the refund window of its payments is over and there is nothing to stop.`,
  };
  if (over) return outside;
  try {
    return { refundId: (await refunds.stop(service)).refund.id };
  } catch (e) {
    if (e instanceof ApiError && e.code === 'service_not_running') return outside;
    throw e;
  }
}
