import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { AuditBundle, BundleRefund } from './bundle.js';

type Body = Record<string, unknown>;

/** What the bundle's refunds establish and where they contradict their chained records or their receipts. */
export function checkRefunds(bundle: AuditBundle, trusted?: KeyObject): { problems: string[]; facts: string[] } {
  const problems: string[] = [];
  const facts: string[] = [];
  const bodies = new Map<string, Body>();
  const proofs = new Map<string, Body>();
  for (const r of bundle.records) {
    const body = parsed(r.record);
    if (!body) continue;
    bodies.set(r.id, body);
    if (r.kind === 'refund_sent') proofs.set(String(body.refund_id), body);
  }
  const key = operatorKey(bundle, trusted);
  for (const refund of Object.values(bundle.refunds ?? {})) {
    const where = `refund ${refund.id}`;
    const found = [
      ...evaluationProblems(refund, bodies.get(refund.evaluation_id ?? '')),
      ...(refund.status === 'sent' ? sentProblems(refund, proofs.get(refund.id), key) : []),
    ];
    problems.push(...found.map((p) => `${where}: ${p}`));
    if (!found.length && refund.status === 'sent')
      facts.push(
        `${where}: ${refund.amount_atomic} atomic units back to ${refund.payer} for ${refund.order_ids.join(', ')}, transaction ${refund.transaction}, proven on chain and receipted by the operator key`,
      );
    else if (!found.length) facts.push(`${where}: ${refund.status}, ${refund.amount_atomic ?? 'no'} atomic units`);
  }
  return { problems, facts };
}

/** The refund's amount is what its chained evaluation gave (the whole, or its payer's transfer of a split one). */
function evaluationProblems(refund: BundleRefund, evaluation: Body | undefined): string[] {
  if (!refund.evaluation_id) return refund.status === 'sent' ? ['sent without an evaluation'] : [];
  if (evaluation?.kind !== 'refund_evaluation') return [`its evaluation ${refund.evaluation_id} is not in the bundle`];
  if (refund.status === 'split' || refund.status === 'none') return [];
  const transfers = evaluation.transfers as Array<{ payer: string; amount_atomic: string }> | undefined;
  const expected = refund.part_of
    ? transfers?.find((t) => t.payer.toLowerCase() === refund.payer?.toLowerCase())?.amount_atomic
    : evaluation.amount_atomic;
  return expected === refund.amount_atomic
    ? []
    : [`${refund.amount_atomic} atomic units, but its evaluation gives ${expected}`];
}

/** A sent refund has its chained proof and a receipt signed by the operator key, all stating the same transfer. */
function sentProblems(refund: BundleRefund, proof: Body | undefined, key: KeyObject | undefined): string[] {
  if (!proof) return ['sent, but the proof of its transfer (a refund_sent record) is not in the bundle'];
  const problems: string[] = [];
  const chained = {
    transaction: (proof.proof as Body | undefined)?.transaction,
    amount_atomic: proof.amount_atomic,
    payer: proof.to,
    evaluation_id: proof.evaluation_id,
  };
  for (const [field, value] of Object.entries(chained))
    if (value !== refund[field as keyof typeof chained])
      problems.push(`its ${field} ${refund[field as keyof typeof chained]} is not the chained proof's ${value}`);
  const receipt = receiptPayload(refund, key);
  if (typeof receipt === 'string') return [...problems, receipt];
  const stated = {
    refundId: refund.id,
    transaction: refund.transaction,
    amount: refund.amount_atomic,
    payer: refund.payer,
    evaluationId: refund.evaluation_id,
    orderIds: refund.order_ids,
  };
  for (const [field, value] of Object.entries(stated))
    if (JSON.stringify(receipt[field]) !== JSON.stringify(value))
      problems.push(
        `its receipt states ${field} ${JSON.stringify(receipt[field])}, the refund ${JSON.stringify(value)}`,
      );
  return problems;
}

/** The receipt's payload once its signature holds under the operator key; else why not. */
function receiptPayload(refund: BundleRefund, key: KeyObject | undefined): Body | string {
  const [header, payload, signature] = refund.receipt?.signature?.split('.') ?? [];
  if (!signature) return 'sent, but the bundle has no receipt for it';
  if (!key) return 'its receipt cannot be checked: the bundle names no operator key';
  const signed = verify(null, Buffer.from(`${header}.${payload}`), key, Buffer.from(signature, 'base64url'));
  if (!signed) return 'its receipt is not signed by the operator key: the receipt was altered';
  return parsed(Buffer.from(payload, 'base64url').toString('utf8')) ?? 'its receipt is not JSON';
}

function operatorKey(bundle: AuditBundle, trusted?: KeyObject): KeyObject | undefined {
  if (trusted) return trusted;
  try {
    return createPublicKey(bundle.signed_head.public_key);
  } catch {
    return undefined;
  }
}

function parsed(text: string): Body | undefined {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
