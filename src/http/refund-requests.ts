import type Router from '@koa/router';
import type { Context } from 'koa';
import { ApiError } from '../errors/index.js';
import { recordedRefund, requestRefund, type OperationDeps, type RefundAnswer } from '../operations/index.js';
import { refundRequestSchema, type RefundRequest } from '../refunds/index.js';
import { sendError } from './error-document.js';
import { REFUND_ENDPOINT_PATH } from './refund-terms.js';
import { bodyReader } from './request-body.js';

const readRefundRequest = bodyReader<RefundRequest>(refundRequestSchema, 'refund request');
const keyPattern = /^[\x21-\x7E]{1,255}$/;

/**
 * The refund endpoint of x402's proposed refund extension, which the order and extension 402s advertise: the payer's
 * signed request stops the service as its owner's POST /services/{id}/stop does, and GET …/{idempotencyKey} reads
 * the answer again (a pending refund turns executed once proven on chain). No API key: the signature is the
 * credential.
 */
export function refundRequestRoutes(router: Router, deps: OperationDeps): void {
  router.post(REFUND_ENDPOINT_PATH, async (ctx) => {
    send(ctx, await requestRefund(deps, await readRefundRequest(ctx)));
  });

  router.get(`${REFUND_ENDPOINT_PATH}/:idempotency_key`, async (ctx) => {
    const key = ctx.params.idempotency_key;
    if (!keyPattern.test(key)) {
      throw new ApiError(404, 'refund_request_not_found', 'No refund request was made with this idempotencyKey.');
    }
    send(ctx, await recordedRefund(deps, key));
  });
}

function send(ctx: Context, answer: RefundAnswer): void {
  if (answer.ok) {
    ctx.status = answer.httpStatus;
    ctx.body = { ok: true, ...answer.body };
    return;
  }
  sendError(ctx, new ApiError(answer.httpStatus, answer.code, answer.message));
  ctx.body = { ...(ctx.body as object), ...answer.body };
}
