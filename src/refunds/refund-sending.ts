import { getAddress, type Address, type Hex } from 'viem';
import { refundProofRecord } from '../audit/index.js';
import { recordEvent } from '../events/index.js';
import { randomId } from '../ids/index.js';
import { crashPoint } from '../orders/index.js';
import type { TransferProof } from '../payments/index.js';
import { atomicToAmount } from '../rules/index.js';
import type { RefundDeps } from './refund-deps.js';
import type { RefundRow } from './refund-store.js';

/** Back-off of a refund that could not be sent: 5 s, doubling, at most 10 minutes. */
export function retryDelaySeconds(attempts: number): number {
  return Math.min(600, 5 * 2 ** Math.min(Math.max(attempts - 1, 0), 7));
}

/**
 * Sends one pending refund, or learns that it was sent. The chain is asked first (a crash may have left the transfer
 * mined and unrecorded): the refund counts as sent only on the token's AuthorizationUsed(refund wallet, nonce) and
 * Transfer(refund wallet → payer, amount) logs, and, on the embedded chain, once the chain state that shows them is
 * saved. A wallet short of USDC or gas postpones the refund with its reason.
 */
export async function sendRefund(deps: RefundDeps, refund: RefundRow): Promise<RefundRow | undefined> {
  const { wallet, ledger } = deps;
  if (!wallet || !ledger) {
    await deps.store.postpone(refund.id, deps.settings.walletMissingReason ?? 'no refund wallet is configured', 60);
    return undefined;
  }
  const expected = {
    payer: wallet.address,
    nonce: refund.nonce,
    payTo: refund.payer!,
    amount: refund.amount_atomic!,
    fromBlock: BigInt(refund.from_block ?? '0'),
  };
  let evidence = await ledger.evidence(expected);
  if (evidence.kind === 'unused') {
    const short = await wallet.shortfall(BigInt(refund.amount_atomic!));
    if (short) {
      const lacks =
        short.kind === 'usdc'
          ? `the refund wallet ${wallet.address} holds ${atomicToAmount(short.holds.toString(), 6)} USDC and this refund needs ${atomicToAmount(short.needs.toString(), 6)}`
          : `the refund wallet ${wallet.address} lacks gas (holds ${short.holds} wei, needs about ${short.needs})`;
      const delay = retryDelaySeconds(refund.attempts);
      deps.metrics?.refundWalletShort.inc({ lacks: short.kind });
      deps.metrics?.refunds.inc({ result: 'postponed' });
      deps.log.warn({ refund_id: refund.id, lacks: short.kind, retry_in_seconds: delay }, `refund postponed: ${lacks}`);
      await deps.store.postpone(refund.id, `${lacks}; retried in ${delay} s`, delay, wallet.address);
      return undefined;
    }
    const sent = await wallet.send(
      getAddress(refund.payer as Address),
      BigInt(refund.amount_atomic!),
      refund.nonce as Hex,
      () => crashPoint('refund_after_broadcast'),
    );
    evidence =
      (sent.success && (await ledger.evidenceOfTransaction(sent.transaction, expected))) ||
      (await ledger.evidence(expected));
  }
  if (evidence.kind === 'paid') return recordSent(deps, refund, wallet.address, evidence.proof);
  if (evidence.kind === 'canceled' || evidence.kind === 'spent_elsewhere') {
    // Only the refund wallet can use its nonces: someone else holds its key, or it was used by hand. This refund can
    // never be sent with its nonce; it fails visibly for an operator instead of being retried or shown as sent.
    const reason = `the refund's authorization was used by another transaction (${('transaction' in evidence && evidence.transaction) || 'unknown'}), not this refund: an operator must look at the refund wallet`;
    deps.log.error(
      { refund_id: refund.id, evidence },
      'the refund nonce was used by another transfer than this refund',
    );
    await deps.db.transaction(async (client) => {
      const failed = await deps.store.markFailed(client, refund.id, reason);
      if (failed) {
        await recordEvent(client, {
          type: 'refund.failed',
          serviceId: failed.service_id ?? undefined,
          orderId: failed.order_id ?? undefined,
          apiKeyId: failed.api_key_id,
          data: { refund_id: failed.id, reason: failed.reason, amount_atomic: failed.amount_atomic, message: reason },
        });
      }
    });
    deps.metrics?.refunds.inc({ result: 'failed' });
    return undefined;
  }
  await deps.store.postpone(refund.id, 'the refund transfer is not visible on chain yet', 2);
  return undefined;
}

/** The proof, once the chain state that holds it is saved, then the refund is sent: chained record and event. */
async function recordSent(
  deps: RefundDeps,
  refund: RefundRow,
  from: string,
  proof: TransferProof,
): Promise<RefundRow | undefined> {
  await deps.ledger!.saved();
  crashPoint('refund_after_proof');
  const row = await deps.db.transaction(async (client) => {
    const sent = await deps.store.markSent(
      client,
      refund.id,
      from,
      proof.transaction,
      proof as unknown as Record<string, unknown>,
    );
    if (!sent) return undefined;
    const id = randomId('rfp_', 16);
    const { record, text, hash } = refundProofRecord({
      id,
      refund_id: sent.id,
      evaluation_id: sent.evaluation_id!,
      service_id: sent.service_id,
      order_ids: sent.order_ids,
      from,
      to: sent.payer!,
      amount_atomic: sent.amount_atomic!,
      nonce: sent.nonce,
      proof: proof as unknown as Record<string, unknown>,
      sent_at: sent.sent_at!.toISOString(),
    });
    await client.query('SELECT audit_append($1, $2, $3, $4, $5, $6)', [
      id,
      record.kind,
      null,
      sent.service_id ?? sent.order_id,
      text,
      hash,
    ]);
    await recordEvent(client, {
      type: 'refund.sent',
      serviceId: sent.service_id ?? undefined,
      orderId: sent.order_id ?? undefined,
      apiKeyId: sent.api_key_id,
      data: {
        refund_id: sent.id,
        ...(sent.part_of && { part_of: sent.part_of }),
        reason: sent.reason,
        amount_atomic: sent.amount_atomic,
        to: sent.payer,
        transaction: proof.transaction,
        order_ids: sent.order_ids,
      },
    });
    return sent;
  });
  if (row) {
    deps.metrics?.refunds.inc({ result: 'sent' });
    deps.log.info(
      { refund_id: refund.id, transaction: proof.transaction, amount_atomic: refund.amount_atomic },
      'refund sent: transfer proven on chain',
    );
  }
  return row;
}
