import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from '@x402/core/http';
import { x402ResourceServer, type FacilitatorClient } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyResponse } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/server';
import { bazaarResourceServerExtension } from '@x402/extensions/bazaar';
import {
  declarePaymentIdentifierExtension,
  PAYMENT_IDENTIFIER,
  paymentIdentifierResourceServerExtension,
} from '@x402/extensions/payment-identifier';
import { assetDomain } from '../chain/networks.js';
import { ApiError } from '../errors/index.js';
import { unsafeJson } from '../schema/json-limits.js';
import type { FacilitatorPool, SettlementRoute } from './facilitator-pool.js';
import { isExactEvmPayment } from './payment-shape.js';
import { readPaymentIdentifier, type PaymentIdentifier } from './payment-identifier.js';
import type { OfferReceipts } from './receipts.js';
import { sentExactEvmPayment, type SentPayment } from './sent-payment.js';

export type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyResponse };
export type { SettlementRoute };

/** How long a failed look at the facilitators' /supported answers for itself before they are asked again. */
const SUPPORTED_RETRY_MS = 2000;

export interface PaymentTerms {
  network: `${string}:${string}`;
  /** The USDC contract the payment is made in. */
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
}

/** What a 402 names as the thing paid for (x402 ResourceInfo; serviceName and tags are read by bazaar catalogs). */
export interface PaidResource {
  url: string;
  description: string;
  serviceName?: string;
  tags?: string[];
}

/**
 * A paid operation's bazaar declaration (declareDiscoveryExtension), enriched with the HTTP method and route.
 * `key` identifies it for caching: the same key must always mean the same declaration.
 */
export interface DiscoveryDeclaration {
  key: string;
  method: string;
  path: string;
  routePattern: string;
  extensions: Record<string, unknown>;
}

/** What one x402 v2 "exact" payment looks like when it is authorised by EIP-3009. */
export interface Authorization {
  from: string;
  to: string;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: string;
}

/**
 * The x402 resource-server side of a purchase, built on @x402/core: requirements for an exact amount,
 * the PAYMENT-REQUIRED header, decoding PAYMENT-SIGNATURE, verify and settle through the facilitator.
 */
export class PaymentGateway {
  private readonly server: x402ResourceServer;
  private ready?: Promise<void>;
  private readonly pool?: FacilitatorPool;
  /** Rejects every facilitator call still waiting once the service stops (close). */
  private readonly stopping = stopSignal();
  /** Requirements and PAYMENT-REQUIRED headers depend only on the amount and resource: built once each. */
  private readonly built = new Map<string, Promise<PaymentRequirements | string>>();

  constructor(
    facilitator: FacilitatorClient & { pool?: FacilitatorPool },
    readonly terms: PaymentTerms,
    readonly receipts?: OfferReceipts,
  ) {
    this.pool = facilitator.pool;
    this.server = registerExactEvmScheme(new x402ResourceServer(facilitator), { networks: [terms.network] });
    if (receipts) this.server.registerExtension(receipts.extension());
    this.server.registerExtension(paymentIdentifierResourceServerExtension);
    this.server.registerExtension(bazaarResourceServerExtension);
  }

  /**
   * Asks the facilitators what they support, until one lists exact on our network: a failed look (none answered,
   * none lists it) answers for itself for a couple of seconds, then the next use asks again, so a facilitator fixed
   * meanwhile (or a second one that comes up) makes checkout work without a restart.
   */
  initialize(): Promise<void> {
    if (this.ready) return this.ready;
    const ready = this.server.initialize().then(
      () => {
        if (!this.server.getSupportedKind(2, this.terms.network, 'exact')) {
          throw checkoutUnavailable(
            this.pool?.unavailableReason() ??
              `the facilitator does not list exact on ${this.terms.network} in its /supported`,
          );
        }
      },
      (e: unknown) => {
        throw checkoutUnavailable(this.pool?.unavailableReason() ?? `the facilitator did not answer: ${messageOf(e)}`);
      },
    );
    this.ready = ready;
    ready.catch(() =>
      setTimeout(() => {
        if (this.ready === ready) this.ready = undefined;
      }, SUPPORTED_RETRY_MS).unref(),
    );
    return ready;
  }

  /** Why no order can be paid now (no facilitator usable), or undefined; remote facilitators only. */
  unavailableReason(): string | undefined {
    return this.pool?.unavailableReason();
  }

  /** The service is stopping: facilitator calls still waiting give up (their outcome is unknown), new ones fail. */
  close(): void {
    this.pool?.close();
    this.stopping.stop();
  }

  /** A facilitator call that gives up when the service stops. */
  private interruptible<T>(call: Promise<T>): Promise<T> {
    return Promise.race([call, this.stopping.stopped]);
  }

  requirements(amountAtomic: string): Promise<PaymentRequirements> {
    return this.memo(`requirements\n${amountAtomic}`, () =>
      this.buildRequirements(amountAtomic),
    ) as Promise<PaymentRequirements>;
  }

  paymentRequiredHeader(
    requirements: PaymentRequirements,
    resource: PaidResource,
    error: string,
    discovery?: DiscoveryDeclaration,
  ): Promise<string> {
    // Signed offers expire: a header is rebuilt every minute, so an offer has most of its validity left.
    const key = `header\n${requirements.amount}\n${JSON.stringify(resource)}\n${error}\n${discovery?.key ?? ''}\n${this.receipts ? Math.floor(Date.now() / 60_000) : ''}`;
    return this.memo(key, () => this.buildHeader(requirements, resource, error, discovery)) as Promise<string>;
  }

  /** The payment-identifier of a PAYMENT-SIGNATURE (x402 extension), read without running anything the client sent. */
  paymentId(payload: PaymentPayload): PaymentIdentifier {
    return readPaymentIdentifier(payload.extensions?.[PAYMENT_IDENTIFIER]);
  }

  private memo(key: string, build: () => Promise<PaymentRequirements | string>): Promise<PaymentRequirements | string> {
    let value = this.built.get(key);
    if (!value) {
      if (this.built.size >= 1000) this.built.clear();
      value = build();
      value.catch(() => this.built.delete(key));
      this.built.set(key, value);
    }
    return value;
  }

  private async buildRequirements(amountAtomic: string): Promise<PaymentRequirements> {
    await this.initialize();
    const [requirements] = await this.buildPaymentRequirements({
      scheme: 'exact',
      network: this.terms.network,
      payTo: this.terms.payTo,
      maxTimeoutSeconds: this.terms.maxTimeoutSeconds,
      price: { amount: amountAtomic, asset: this.terms.asset, extra: assetDomain(this.terms.network) },
    });
    return requirements;
  }

  /** buildPaymentRequirements, whose failure (no facilitator lists our kind any more) is a 503, never a 500. */
  private buildPaymentRequirements(
    config: Parameters<x402ResourceServer['buildPaymentRequirements']>[0],
  ): Promise<PaymentRequirements[]> {
    return this.server.buildPaymentRequirements(config).catch((e: unknown) => {
      this.ready = undefined;
      throw checkoutUnavailable(this.pool?.unavailableReason() ?? messageOf(e));
    });
  }

  private async buildHeader(
    requirements: PaymentRequirements,
    resource: PaidResource,
    error: string,
    discovery?: DiscoveryDeclaration,
  ): Promise<string> {
    const extensions = {
      ...this.receipts?.declaration(),
      [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false),
      ...(discovery && this.server.enrichExtensions(discovery.extensions, httpContext(discovery))),
    };
    const required = await this.server.createPaymentRequiredResponse(
      [requirements],
      { ...resource, mimeType: 'application/json' },
      error,
      extensions,
    );
    return encodePaymentRequiredHeader(required);
  }

  /**
   * The payment of a PAYMENT-SIGNATURE header (whoever carried it: a REST request, an MCP call) as a sale reads it,
   * or undefined when it is not Base64 JSON of a scheme this service takes.
   */
  decode(header: string): SentPayment | undefined {
    try {
      const payload = decodePaymentSignatureHeader(header);
      if (!isExactEvmPayment(payload) || unsafeJson(payload)) return undefined;
      return sentExactEvmPayment(payload);
    } catch {
      return undefined;
    }
  }

  /** True when the payment accepted exactly these requirements (amount, asset, payTo, network, scheme). */
  matches(requirements: PaymentRequirements, payload: PaymentPayload): boolean {
    return this.server.findMatchingRequirements([requirements], payload) !== undefined;
  }

  async verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<VerifyResponse> {
    await this.initialize();
    return this.interruptible(this.server.verifyPayment(payload, requirements)).catch((e) => {
      const reason = this.pool?.unavailableReason();
      throw reason ? checkoutUnavailable(reason) : unavailable(e);
    });
  }

  /**
   * Settles through the facilitators; with several, `route` keeps a payment on the facilitator it was sent to
   * (src/payments/facilitator-pool.ts). Not behind initialize: a settlement already under way is sent whatever the
   * facilitators list now.
   */
  async settle(
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    route: SettlementRoute = {},
  ): Promise<SettleResponse> {
    const settle = () => this.server.settlePayment(payload, requirements);
    return this.interruptible(this.pool ? this.pool.routed(route, settle) : settle());
  }

  static unavailable(cause: unknown): ApiError {
    return unavailable(cause);
  }

  static responseHeader(settlement: SettleResponse & { extensions?: Record<string, unknown> }): string {
    return encodePaymentResponseHeader(settlement);
  }
}

/** The request as x402's HTTP extensions read it (bazaar takes the method and the route template from it). */
function httpContext(discovery: DiscoveryDeclaration) {
  const adapter = {
    getHeader: () => undefined,
    getMethod: () => discovery.method,
    getPath: () => discovery.path,
    getUrl: () => discovery.path,
    getAcceptHeader: () => 'application/json',
    getUserAgent: () => '',
  };
  return { adapter, path: discovery.path, method: discovery.method, routePattern: discovery.routePattern };
}

/** A promise that rejects once `stop` is called: what calls under way race against. */
function stopSignal() {
  let stop!: () => void;
  const stopped = new Promise<never>((_, reject) => {
    stop = () => reject(new Error('the service is stopping: the facilitator call was given up, its outcome unknown'));
  });
  stopped.catch(() => undefined);
  return { stopped, stop };
}

/** No facilitator can take a payment now (none answers, none lists our network): nothing can be charged. */
function checkoutUnavailable(reason: string): ApiError {
  return new ApiError(
    503,
    'payment_network_unavailable',
    `Checkout is unavailable on this deployment now: ${reason.slice(0, 600)}. Nothing was charged. Retry the same request with the same Idempotency-Key in a minute; GET /api/v1/availability says when checkout is available again.`,
    { retryable: true, retryAfterSeconds: 60 },
  );
}

function messageOf(e: unknown): string {
  return String((e as Error)?.message ?? e)
    .split('\n')[0]
    .slice(0, 200);
}

/** The facilitator or the chain did not answer: nothing was charged, the same request may be retried. */
function unavailable(cause: unknown): ApiError {
  return new ApiError(
    503,
    'payment_network_unavailable',
    `The payment network did not answer (${(cause as Error).message?.split('\n')[0].slice(0, 200)}). Nothing was charged: retry the same request with the same Idempotency-Key in a few seconds.`,
    { retryable: true, retryAfterSeconds: 5 },
  );
}
