import type { AuthorizationLedger, ExpectedPayment, PaymentEvidence, TransferProof } from './authorization-ledger.js';

/** Orders claimed before heights were recorded are searched over the last day of Base blocks (2 s each). */
const LEGACY_SEARCH_BLOCKS = 43_200n;
/** Payments looked up on the chain at once. */
const AT_ONCE = 8;

/** What finds a payment on chain, whatever the scheme: who paid whom how much, and what the payer spends only once. */
export interface PaymentOnChain {
  payer: string;
  reference: string;
  /** Unix seconds from which the payment can no longer be settled. */
  validUntil: string;
  payTo: string;
  amountAtomic: string;
  /** The height its proof is searched from; null for orders claimed before heights were recorded. */
  fromBlock: bigint | null;
}

/** What the chain shows of the payment since its claim: paid (with its proof), unused, cancelled, spent elsewhere. */
export async function evidenceOnChain(ledger: AuthorizationLedger, payment: PaymentOnChain): Promise<PaymentEvidence> {
  const expected = expectedOf(payment);
  if (payment.fromBlock === null) {
    const latest = await ledger.latestBlock();
    expected.fromBlock = latest > LEGACY_SEARCH_BLOCKS ? latest - LEGACY_SEARCH_BLOCKS : 0n;
  }
  return ledger.evidence(expected);
}

/** True only when the chain shows the payment was not taken and never can be (unused, past its valid until). */
export function expiredUnusedOnChain(ledger: AuthorizationLedger, payment: PaymentOnChain): Promise<boolean> {
  return ledger.expiredUnused(payment.payer, payment.reference, payment.validUntil);
}

/** Which of these payments the chain shows taken, each with its proof; a few are asked at a time. */
export async function takenOnChain<T extends PaymentOnChain>(
  ledger: AuthorizationLedger,
  payments: T[],
): Promise<Array<{ payment: T; proof: TransferProof }>> {
  const taken: Array<{ payment: T; proof: TransferProof }> = [];
  for (let i = 0; i < payments.length; i += AT_ONCE) {
    const batch = payments.slice(i, i + AT_ONCE);
    const found = await Promise.all(batch.map((payment) => evidenceOnChain(ledger, payment)));
    found.forEach((evidence, j) => {
      if (evidence.kind === 'paid') taken.push({ payment: batch[j], proof: evidence.proof });
    });
  }
  return taken;
}

export function expectedOf(payment: PaymentOnChain): ExpectedPayment {
  return {
    payer: payment.payer,
    nonce: payment.reference,
    payTo: payment.payTo,
    amount: payment.amountAtomic,
    fromBlock: payment.fromBlock ?? -1n,
  };
}
