import { refundRecord } from '../audit/index.js';
import { randomId } from '../ids/index.js';
import { evaluateRefund, type RefundEvaluation, type RefundInput } from '../pricing/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { Client } from '../store/index.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';
import { failureTerms, stopTerms } from './refund-terms.js';

/** Blocks before the refund's first send that its proof is searched from (reorgs). */
const REORG_MARGIN_BLOCKS = 5n;

/**
 * Fixes a refund's amount: the rules' evaluation (a chained audit record, replayable) of what was paid and what is
 * left, bounded by what was received minus refunds already made. Runs once per refund, under its row lock; for a stop,
 * only after the mount was cut. A refund over the daily cap waits for an operator.
 */
export async function computeRefund(deps: RefundDeps, refundId: string): Promise<RefundRow> {
  const snapshot = deps.live.current;
  await deps.audit.saveSnapshot(snapshot);
  const latest = deps.ledger ? await deps.ledger.latestBlock().catch(() => undefined) : undefined;
  const fromBlock =
    latest === undefined ? null : (latest > REORG_MARGIN_BLOCKS ? latest - REORG_MARGIN_BLOCKS : 0n).toString();
  const done = await deps.db.transaction(async (client) => {
    const refund = await deps.store.lockById(client, refundId);
    if (!refund || refund.status !== 'computing') return refund;
    const terms = await termsOf(client, refund);
    const refunded = await deps.store.refundedFor(client, terms.orderIds, refund.id);
    const input: RefundInput = { ...terms.input, refunded_atomic: refunded };
    const evaluation = await evaluateRefund(snapshot, input);
    const evaluationId = randomId('rfe_', 16);
    const { record, text, hash } = refundRecord(evaluationId, snapshot.hash, input, evaluation, new Date());
    await client.query('SELECT audit_append($1, $2, $3, $4, $5, $6)', [
      evaluationId,
      record.kind,
      snapshot.hash,
      refund.service_id ?? refund.order_id,
      text,
      hash,
    ]);
    const amount = BigInt(evaluation.amount_atomic);
    const needsApproval = amount > 0n && (await overDailyCap(deps, client, amount));
    const transfers = evaluation.transfers;
    const pendingReason = whyNotSentYet(deps, evaluation, needsApproval);
    const split = transfers !== undefined && transfers.length > 1;
    const whole = await deps.store.computed(client, refund.id, {
      status: amount === 0n ? 'none' : split ? 'split' : 'pending',
      amount: evaluation.amount_atomic,
      evaluationId,
      orderIds: terms.orderIds,
      payer: split ? null : (transfers?.[0]?.payer ?? terms.payer),
      fromBlock,
      needsApproval,
      pendingReason: split ? null : pendingReason,
    });
    if (split) await deps.store.insertParts(client, whole, transfers, { fromBlock, needsApproval, pendingReason });
    return whole;
  });
  if (!done) throw new Error(`no refund ${refundId}`);
  if (done.status !== 'computing')
    deps.log.info(
      { refund_id: done.id, amount_atomic: done.amount_atomic, status: done.status, service_id: done.service_id },
      'refund computed',
    );
  return done;
}

async function termsOf(
  client: Client,
  refund: RefundRow,
): Promise<{ input: Omit<RefundInput, 'refunded_atomic'>; orderIds: string[]; payer: string | null }> {
  if (refund.reason === 'stopped') {
    const {
      rows: [service],
    } = await client.query('SELECT id, order_id, product_id, expires_at, usage FROM services WHERE id = $1', [
      refund.service_id,
    ]);
    return stopTerms(client, refund.id, service, refund.as_of);
  }
  const {
    rows: [order],
  } = await client.query(
    `SELECT id, product_id, amount_atomic::text AS amount_atomic, payer, settlement, configuration ->> 'duration_hours' AS hours,
            CASE WHEN upgrade_of IS NOT NULL THEN 'upgrade' WHEN extension_of IS NOT NULL THEN 'extension' ELSE 'order' END AS kind
     FROM orders WHERE id = $1`,
    [refund.order_id],
  );
  const terms = failureTerms(refund.id, order, refund.service_id, refund.as_of);
  return { ...terms, orderIds: [order.id] };
}

/** Why a refund is not on its way at once: nothing to send, waiting for an operator, or no refund wallet. */
function whyNotSentYet(deps: RefundDeps, evaluation: RefundEvaluation, needsApproval: boolean): string | null {
  if (evaluation.amount_atomic === '0') {
    const minimum = atomicToAmount(evaluation.minimum_atomic, 6);
    return (
      `nothing to refund: the unused share less what is kept (${evaluation.total_atomic} atomic units ` +
      `in all) is below the minimum refund of ${minimum} USDC for each wallet that paid`
    );
  }
  if (needsApproval) {
    const cap = atomicToAmount(String(deps.settings.maxPerDayAtomic), 6);
    return `waits for an operator: refunds over the daily cap of ${cap} USDC are approved by hand`;
  }
  return deps.settings.walletMissingReason ?? null;
}

/** Whether this refund takes the last 24 hours' refunds over the daily cap (serialized: two refunds cannot both fit). */
async function overDailyCap(deps: RefundDeps, client: Client, amount: bigint): Promise<boolean> {
  const cap = deps.settings.maxPerDayAtomic;
  if (cap === undefined) return false;
  await client.query("SELECT pg_advisory_xact_lock(hashtextextended('refund daily cap', 0))");
  return (await deps.store.committedToday(client)) + amount > cap;
}
