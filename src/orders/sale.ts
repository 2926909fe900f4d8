import { randomId } from '../ids/index.js';
import type { DiscoveryDeclaration, Offer, PaymentPayload, SentPayment, VerifiedPayment } from '../payments/index.js';
import type { Snapshot } from '../pricing/index.js';
import type { AuditEntry, NewOrder } from './order-store.js';
import type { Demand, PricedSale, SaleKind } from './sale-kind.js';

// What OrderService.place learns, step by step, about one sale; the order row and audit record it claims.

/** What a paid operation asks to buy (POST /orders, an upgrade, an extension, an MCP order) and how it pays. */
export interface PlaceOrder {
  apiKeyId: string;
  idempotencyKey: string;
  /** What is sold: a new stream, an upgrade or an extension (sale-kind.ts). */
  sale: SaleKind;
  paymentSignature?: string;
  resourceUrl: string;
  /** How the 402 describes this operation to discovery (x402 bazaar): its declaration, service name and tags. */
  discovery?: { declaration: DiscoveryDeclaration; serviceName: string; tags: string[] };
}

/** The request being placed, with what was read before pricing: its hash and the payment it carries, if any. */
export interface Attempt extends PlaceOrder {
  requestHash: string;
  /** The PAYMENT-SIGNATURE read by payments/; undefined when there is none or it is not a payment it takes. */
  sent?: SentPayment;
  paymentId?: string;
  /** The order that already used the sent payment (payer and reference), read with the Idempotency-Key. */
  authorizationUsedBy?: string;
}

/** What the sale costs and what it needs of capacity, priced on one snapshot. */
export interface Sale extends PricedSale {
  snapshot: Snapshot;
  demand: Demand;
}

/** The audit record of the evaluation that priced the sale, as the claim appends it to the chain. */
export function auditEntryOf(sale: Sale): AuditEntry {
  const id = randomId('ev_', 12);
  const { snapshot } = sale;
  const record = sale.evidence(id, snapshot.hash, new Date());
  return { id, kind: record.record.kind, snapshotHash: snapshot.hash, text: record.text, hash: record.hash };
}

/**
 * The payment as an order keeps it: what the payer sent, less what x402 clients copy back from our own 402 (the bazaar
 * declaration and each extension's JSON Schema: about 5 kB of our own documents, unsigned, no part of the payment).
 * The signed authorization, the terms it accepted, the resource and each extension's info (payment-identifier, the
 * offer receipt) are kept as sent. The order row and each of its chained states hold this copy: its size was paid
 * for many times over in every purchase.
 */
export function storedPayment(payload: PaymentPayload): Record<string, unknown> {
  const { extensions, ...rest } = payload;
  if (!extensions) return rest;
  const kept: Record<string, unknown> = {};
  for (const [key, extension] of Object.entries(extensions)) {
    if (key === 'bazaar') continue;
    kept[key] = isPlainObject(extension) && 'schema' in extension ? withoutSchema(extension) : extension;
  }
  return Object.keys(kept).length ? { ...rest, extensions: kept } : rest;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function withoutSchema(extension: Record<string, unknown>): Record<string, unknown> {
  const { schema: _declared, ...kept } = extension;
  return kept;
}

/** The order row a verified payment claims, in "settling". */
export function newOrderOf(
  attempt: Attempt,
  sale: Sale,
  offer: Offer,
  payment: VerifiedPayment,
  evaluationId: string,
): NewOrder {
  const { requirements } = offer;
  return {
    id: randomId('ra_', 18),
    api_key_id: attempt.apiKeyId,
    idempotency_key: attempt.idempotencyKey,
    request_hash: attempt.requestHash,
    product_id: sale.priced.output.product_id,
    billing: sale.billing,
    request: attempt.sale.request as Record<string, unknown>,
    ...attempt.sale.changes,
    configuration: sale.configuration,
    amount_atomic: sale.amountAtomic,
    quote_id: sale.quoteId ?? null,
    evaluation_id: evaluationId,
    network: requirements.network,
    asset: requirements.asset,
    pay_to: requirements.payTo,
    payer: payment.payer.toLowerCase(),
    payment_reference: payment.reference.toLowerCase(),
    payment_valid_until: payment.validUntil,
    claim_block: payment.claimBlock.toString(),
    payment: storedPayment(payment.payload),
    requirements: requirements as unknown as Record<string, unknown>,
    ...(attempt.paymentId && { payment_id: attempt.paymentId }),
  };
}
