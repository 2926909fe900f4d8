import type { RecordedRefundRequest, Refunds, RefundView } from '../refunds/index.js';

/** The proposal's machine-readable denial reasons (x402 specs/extensions/refund.md). */
export type DenialReason =
  | 'outside_window'
  | 'not_payer'
  | 'already_refunded'
  | 'amount_exceeds_settled'
  | 'policy_denied'
  | 'unknown_payment';

const DENIAL_STATUS: Record<DenialReason, number> = {
  outside_window: 409,
  not_payer: 403,
  already_refunded: 409,
  amount_exceeds_settled: 409,
  policy_denied: 403,
  unknown_payment: 404,
};

/**
 * A refund request's answer in the proposal's fields (status, amount, refundTxHash, refundReceipt, denialReason)
 * beside ours (the stop's refund as GET /services/{id}/usage shows it). A denial is an error document as well.
 */
export type RefundAnswer =
  | {
      ok: true;
      httpStatus: 200 | 202;
      body: {
        status: 'executed' | 'pending';
        amount: string;
        refundTxHash?: string;
        refundReceipt?: { format: 'jws'; signature: string };
        idempotencyKey: string;
        order_id: string | null;
        service_id: string | null;
        refund: RefundView;
        idempotent_replay: boolean;
      };
    }
  | {
      ok: false;
      httpStatus: number;
      code: string;
      message: string;
      body: { status: 'denied'; amount: string; denialReason: DenialReason; idempotencyKey: string };
    };

export async function refundAnswer(
  refunds: Refunds,
  recorded: RecordedRefundRequest,
  replay: boolean,
): Promise<RefundAnswer> {
  const view = recorded.refund_id ? await refunds.byId(recorded.refund_id) : undefined;
  if (!view) {
    return denied(recorded, recorded.denial_reason as DenialReason, recorded.denial_message ?? 'Denied.');
  }
  const payer = recorded.payer?.toLowerCase();
  // A stop whose amount is still being computed has no transfer yet: pending, for the whole.
  const computing = view.transfers.length === 0 && view.status === 'pending' ? view : undefined;
  const mine = view.transfers.find((t) => t.to?.toLowerCase() === payer) ?? computing;
  if (!mine || view.status === 'none') {
    const why = view.pending_reason ? ` (${view.pending_reason})` : '';
    return denied(
      recorded,
      'already_refunded',
      `The service was stopped and nothing is left to refund to ${recorded.payer}${why}. GET /services/{service_id}/usage shows its refund.`,
    );
  }
  if (mine.status === 'failed') {
    return denied(
      recorded,
      'policy_denied',
      `The refund ${view.id} to ${recorded.payer} was given up by an operator (${mine.pending_reason ?? 'no reason given'}).`,
    );
  }
  const executed = mine.status === 'sent';
  return {
    ok: true,
    httpStatus: executed ? 200 : 202,
    body: {
      status: executed ? 'executed' : 'pending',
      amount: mine.amount?.amount_atomic ?? '0',
      ...(executed && mine.transaction && { refundTxHash: mine.transaction }),
      ...(executed && mine.receipt && { refundReceipt: mine.receipt }),
      idempotencyKey: recorded.idempotency_key,
      order_id: recorded.order_id,
      service_id: recorded.service_id,
      refund: view,
      idempotent_replay: replay,
    },
  };
}

function denied(recorded: RecordedRefundRequest, reason: DenialReason, message: string): RefundAnswer {
  return {
    ok: false,
    httpStatus: DENIAL_STATUS[reason],
    code: `refund_${reason}`,
    message,
    body: {
      status: 'denied',
      amount: recorded.amount_atomic,
      denialReason: reason,
      idempotencyKey: recorded.idempotency_key,
    },
  };
}
