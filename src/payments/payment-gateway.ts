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
import { isExactEvmPayment } from './payment-shape.js';
import { readPaymentIdentifier, type PaymentIdentifier } from './payment-identifier.js';
import type { OfferReceipts } from './receipts.js';

export type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyResponse };

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
  /** Requirements and PAYMENT-REQUIRED headers depend only on the amount and resource: built once each. */
  private readonly built = new Map<string, Promise<PaymentRequirements | string>>();

  constructor(
    facilitator: FacilitatorClient,
    readonly terms: PaymentTerms,
    readonly receipts?: OfferReceipts,
  ) {
    this.server = registerExactEvmScheme(new x402ResourceServer(facilitator), { networks: [terms.network] });
    if (receipts) this.server.registerExtension(receipts.extension());
    this.server.registerExtension(paymentIdentifierResourceServerExtension);
    this.server.registerExtension(bazaarResourceServerExtension);
  }

  /** Asks the facilitator what it supports; retried on the next use when it fails. */
  initialize(): Promise<void> {
    this.ready ??= this.server.initialize().catch((e) => {
      this.ready = undefined;
      throw unavailable(e);
    });
    return this.ready;
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
    const [requirements] = await this.server.buildPaymentRequirements({
      scheme: 'exact',
      network: this.terms.network,
      payTo: this.terms.payTo,
      maxTimeoutSeconds: this.terms.maxTimeoutSeconds,
      price: { amount: amountAtomic, asset: this.terms.asset, extra: assetDomain(this.terms.network) },
    });
    return requirements;
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

  /** The payment payload of a PAYMENT-SIGNATURE header, or undefined when it is not Base64 JSON of the right shape. */
  decode(header: string): { payload: PaymentPayload; authorization: Authorization } | undefined {
    try {
      const payload = decodePaymentSignatureHeader(header);
      if (!isExactEvmPayment(payload) || unsafeJson(payload)) return undefined;
      return { payload, authorization: (payload.payload as { authorization: Authorization }).authorization };
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
    return this.server.verifyPayment(payload, requirements).catch((e) => {
      throw unavailable(e);
    });
  }

  async settle(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleResponse> {
    await this.initialize();
    return this.server.settlePayment(payload, requirements);
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

/** The facilitator or the chain did not answer: nothing was charged, the same request may be retried. */
function unavailable(cause: unknown): ApiError {
  return new ApiError(
    503,
    'payment_network_unavailable',
    `The payment network did not answer (${(cause as Error).message?.split('\n')[0].slice(0, 200)}). Nothing was charged: retry the same request with the same Idempotency-Key in a few seconds.`,
    { retryable: true, retryAfterSeconds: 5 },
  );
}
