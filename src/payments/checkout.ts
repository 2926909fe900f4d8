import { ApiError } from '../errors/index.js';
import type { AuthorizationLedger, PaymentEvidence } from './authorization-ledger.js';
import {
  PaymentGateway,
  type DiscoveryDeclaration,
  type PaidResource,
  type PaymentPayload,
  type PaymentRequirements,
  type SettleResponse,
  type SettlementRoute,
} from './payment-gateway.js';
import type { PaymentIdentifier } from './payment-identifier.js';
import { evidenceOnChain, expectedOf, expiredUnusedOnChain, type PaymentOnChain } from './payment-on-chain.js';
import type { PaymentPrecheck } from './payment-precheck.js';
import type { Offer, PaymentRefusal, VerifiedPayment } from './payment-refusal.js';
import type { ReceiptFacts } from './receipts.js';
import type { SentPayment } from './sent-payment.js';

/** How much later than now + maxTimeoutSeconds a payment may expire: clocks of payer and service differ. */
export const VALID_UNTIL_SLACK_SECONDS = 30;
const REORG_MARGIN_BLOCKS = 5n;

export interface CheckoutOptions {
  gateway: PaymentGateway;
  /** What proves a settlement on chain. */
  ledger: AuthorizationLedger;
  /** Refuses payments that cannot be valid before the facilitator (and the chain) is asked. */
  precheck?: PaymentPrecheck;
}

/** A payment as an order keeps it, to settle it and to find its proof later (payTo and amount from its terms). */
export interface PaymentRecord extends PaymentOnChain {
  payload: Record<string, unknown>;
  requirements: Record<string, unknown>;
}

/** The facilitator's answer to a settlement, before the chain is asked. */
export type SettleAnswer = Pick<SettleResponse, 'success' | 'transaction' | 'errorReason' | 'errorMessage'>;

/**
 * The one entrance to payments, whatever the transport (REST, MCP) and the scheme: the terms of a sale (offer), whether
 * a payment sent can pay them (accept, then verify: a verified payment, or a typed refusal), its settlement, and what
 * the chain says of it. Orders see payer, amount, a reference spent once, valid until and the payload as proof.
 */
export class Checkout {
  private readonly gateway: PaymentGateway;
  private readonly ledger: AuthorizationLedger;
  private readonly precheck?: PaymentPrecheck;

  constructor(options: CheckoutOptions) {
    this.gateway = options.gateway;
    this.ledger = options.ledger;
    this.precheck = options.precheck;
  }

  /** The payment a transport carried (PAYMENT-SIGNATURE form), or undefined when it is not one this service takes. */
  read(signature: string): SentPayment | undefined {
    return this.gateway.decode(signature);
  }

  /** The payer's own id for this payment (x402 payment-identifier): one purchase however often it is sent. */
  paymentId(sent: SentPayment): PaymentIdentifier {
    return this.gateway.paymentId(sent.payload);
  }

  /** The terms of a sale of this amount for this resource, and its 402 answers. */
  async offer(amountAtomic: string, resource: PaidResource, declaration?: DiscoveryDeclaration): Promise<Offer> {
    const requirements = await this.gateway.requirements(amountAtomic);
    const paymentRequired = async (code: string, message: string, status = 402): Promise<ApiError> => {
      const header = await this.gateway.paymentRequiredHeader(requirements, resource, message, declaration);
      return new ApiError(status, code, message, { paymentRequired: header });
    };
    return { requirements, amountAtomic, paymentRequired };
  }

  /**
   * Whether the payment sent can pay for this offer as far as its terms go: exactly these terms, made out for this
   * operation, valid no longer than the service accepts. The sent payment, or why not.
   */
  accept(
    offer: Offer,
    call: { signature?: string; sent?: SentPayment; resourceUrl: string },
  ): SentPayment | PaymentRefusal {
    const { requirements } = offer;
    if (!call.signature) return { refused: 'missing' };
    if (!call.sent) return { refused: 'unreadable' };
    const { payload, validUntil } = call.sent;
    if (!this.gateway.matches(requirements, payload)) return { refused: 'other_terms' };
    // The signature covers only the transfer: without this, a payment made out for one operation (an order) would
    // buy any other of the same price (an upgrade, an MCP order) while the payer's client showed the first. The
    // operation is bound, not the address it was asked at: another instance, or this one on a new port, sells it too.
    if (operationOf(payload.resource?.url) !== operationOf(call.resourceUrl)) {
      return { refused: 'wrong_resource', paidFor: payload.resource?.url, asked: call.resourceUrl };
    }
    const { maxTimeoutSeconds } = requirements;
    const slackSeconds = VALID_UNTIL_SLACK_SECONDS;
    const latest = BigInt(Math.floor(Date.now() / 1000) + maxTimeoutSeconds + slackSeconds);
    if (BigInt(validUntil) > latest) {
      return { refused: 'valid_too_long', validUntil, maxTimeoutSeconds, slackSeconds, latest };
    }
    return call.sent;
  }

  /**
   * The precheck, then the facilitator's verification, and a height of the chain before the payment can be used (read
   * at most a second ago: earlier is as good): its proof will be searched from there (a few blocks earlier, for
   * reorgs). Throws a 503 when the facilitator or the chain does not answer.
   */
  async verify(offer: Offer, sent: SentPayment): Promise<VerifiedPayment | PaymentRefusal> {
    const { requirements } = offer;
    const refusal = await this.precheck?.refusal(requirements, sent.payload);
    if (refusal) return { refused: 'cannot_be_valid', reason: refusal };
    const [verification, heightAtVerify] = await Promise.all([
      this.gateway.verify(sent.payload, requirements),
      this.ledger.recentBlock().catch((e: unknown) => e as Error),
    ]);
    if (!verification.isValid) {
      // The facilitator reports an unreachable chain as an invalid payment: the agent is told to retry instead.
      await this.ledger.latestBlock().catch((e) => {
        throw PaymentGateway.unavailable(e);
      });
      const reason = verification.invalidReason ?? 'invalid';
      return {
        refused: 'rejected',
        reason,
        ...(verification.invalidMessage && { message: verification.invalidMessage }),
      };
    }
    if (heightAtVerify instanceof Error) throw PaymentGateway.unavailable(heightAtVerify);
    const claimBlock = heightAtVerify > REORG_MARGIN_BLOCKS ? heightAtVerify - REORG_MARGIN_BLOCKS : 0n;
    return { ...sent, claimBlock };
  }

  /**
   * Sends the settlement through the facilitators (`route` keeps a payment on the one it was sent to). Throws when its
   * outcome is unknown (no answer); a refusal is the facilitator's word only: the chain decides (see evidence).
   */
  settle(record: PaymentRecord, route: SettlementRoute = {}): Promise<SettleAnswer> {
    const payload = record.payload as unknown as PaymentPayload;
    return this.gateway.settle(payload, record.requirements as unknown as PaymentRequirements, route);
  }

  /** What the chain shows of the payment since its claim: paid (with its proof), unused, cancelled, spent elsewhere. */
  evidence(record: PaymentRecord): Promise<PaymentEvidence> {
    return evidenceOnChain(this.ledger, record);
  }

  /** The evidence in a transaction the facilitator named as the settlement; undefined when it does not show it. */
  evidenceOfTransaction(transaction: string, record: PaymentRecord): Promise<PaymentEvidence | undefined> {
    return this.ledger.evidenceOfTransaction(transaction, expectedOf(record));
  }

  /** True only when the chain shows the payment was not taken and never can be (unused, past its valid until). */
  expiredUnused(record: PaymentRecord): Promise<boolean> {
    return expiredUnusedOnChain(this.ledger, record);
  }

  /** Resolves once the chain state that proves the payments seen so far would survive a restart of the chain. */
  saved(): Promise<void> {
    return this.ledger.saved();
  }

  /** The PAYMENT-RESPONSE of a settled payment, with its signed receipt when the operator signs them. */
  async paymentResponse(settlement: SettleResponse, facts: ReceiptFacts): Promise<string> {
    const extensions = await this.gateway.receipts?.receipt(facts);
    return PaymentGateway.responseHeader({ ...settlement, ...(extensions && { extensions }) });
  }

  /** The service is stopping: facilitator calls still waiting give up (their outcome is unknown), new ones fail. */
  close(): void {
    this.gateway.close();
  }

  /** Whether payment responses carry signed receipts (they then name the evaluation's hash). */
  get signsReceipts(): boolean {
    return !!this.gateway.receipts;
  }
}

/** What a resource URL names, whatever instance it was asked at: the path of an http(s) URL, any other URL whole. */
function operationOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    const parsed = new URL(url);
    return /^https?:$/.test(parsed.protocol) ? `${parsed.pathname}${parsed.search}` : url;
  } catch {
    return url;
  }
}
