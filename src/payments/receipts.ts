import type { KeyObject } from 'node:crypto';
import {
  createJWS,
  createJWSOfferReceiptIssuer,
  createOfferReceiptExtension,
  declareOfferReceiptExtension,
  OFFER_RECEIPT,
  type JWSSignedReceipt,
  type JWSSigner,
} from '@x402/extensions/offer-receipt';
import type { ResourceServerExtension } from '@x402/core/types';

/** The operator's Ed25519 key (the one that signs the audit chain's heads). */
export interface OperatorKey {
  publicKey: KeyObject;
  signBytes(data: Uint8Array): Buffer;
}

/** What a receipt states about one paid order; an auditor matches it to the order's evidence bundle. */
export interface ReceiptFacts {
  resourceUrl: string;
  payer: string;
  network: string;
  transaction: string;
  issuedAt: Date;
  orderId: string;
  evaluationId: string | null;
  evaluationHash: string | null;
  amountAtomic: string;
}

/** What a refund receipt states: the refund, what it pays back and the transaction that paid it. */
export interface RefundReceiptFacts {
  refundId: string;
  serviceId: string | null;
  orderIds: string[];
  payer: string;
  network: string;
  transaction: string;
  issuedAt: Date;
  evaluationId: string | null;
  amountAtomic: string;
  reason: string;
}

/**
 * Signed offers and receipts (the x402 offer-receipt extension, JWS with EdDSA), signed by the operator key.
 * The key id is a did:jwk of the public key, so an agent verifies with the extension's own helpers and nothing else;
 * it should check that key against the one the operator publishes (GET /audit/head).
 */
export class OfferReceipts {
  readonly kid: string;
  private readonly signer: JWSSigner;

  constructor(
    key: OperatorKey,
    readonly offerValiditySeconds: number,
  ) {
    const { kty, crv, x } = key.publicKey.export({ format: 'jwk' });
    this.kid = `did:jwk:${Buffer.from(JSON.stringify({ crv, kty, x })).toString('base64url')}`;
    this.signer = {
      kid: this.kid,
      format: 'jws',
      algorithm: 'EdDSA',
      sign: async (bytes) => key.signBytes(bytes).toString('base64url'),
    };
  }

  /** Registered on the resource server: signs an offer for every PAYMENT-REQUIRED. */
  extension(): ResourceServerExtension {
    return createOfferReceiptExtension(createJWSOfferReceiptIssuer(this.kid, this.signer));
  }

  declaration(): Record<string, unknown> {
    return declareOfferReceiptExtension({ includeTxHash: true, offerValiditySeconds: this.offerValiditySeconds });
  }

  /**
   * The receipt of a paid order, for PAYMENT-RESPONSE's extensions. Its fields beyond the extension's own (order id,
   * evaluation, amount) are signed with them; issuedAt is the settlement time, so a replay returns the same bytes.
   */
  async receipt(facts: ReceiptFacts): Promise<Record<string, { info: { receipt: JWSSignedReceipt } }>> {
    const payload = {
      version: 1,
      network: facts.network,
      resourceUrl: facts.resourceUrl,
      payer: facts.payer,
      issuedAt: Math.floor(facts.issuedAt.getTime() / 1000),
      transaction: facts.transaction,
      orderId: facts.orderId,
      evaluationId: facts.evaluationId,
      evaluationHash: facts.evaluationHash,
      amount: facts.amountAtomic,
    };
    return {
      [OFFER_RECEIPT]: { info: { receipt: { format: 'jws', signature: await createJWS(payload, this.signer) } } },
    };
  }

  /**
   * The receipt of a refund sent: the offer-receipt extension's receipt fields (payer is who received the refund),
   * with the refund's own. issuedAt is when it was proven sent, so the receipt is the same bytes every time it is asked.
   */
  async refundReceipt(facts: RefundReceiptFacts): Promise<{ format: 'jws'; signature: string }> {
    const payload = {
      version: 1,
      kind: 'refund',
      network: facts.network,
      payer: facts.payer,
      issuedAt: Math.floor(facts.issuedAt.getTime() / 1000),
      transaction: facts.transaction,
      refundId: facts.refundId,
      serviceId: facts.serviceId,
      orderIds: facts.orderIds,
      evaluationId: facts.evaluationId,
      amount: facts.amountAtomic,
      reason: facts.reason,
    };
    return { format: 'jws', signature: await createJWS(payload, this.signer) };
  }
}
