import { canonicalJson, priceRecordText, sha256, TextTemplate, type AuditLog } from '../audit/index.js';
import { randomId } from '../ids/index.js';
import { ApiError } from '../errors/index.js';
import type { PriceInput, Snapshot } from '../pricing/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import { Decimal, type PriceLine } from '../rules/index.js';
import { KeyRevoked } from '../keys/index.js';
import { BatchedCalls, type Database } from '../store/index.js';
import { PricedInputs, type Priced, type Refused } from './priced-inputs.js';

export interface QuoteRequest {
  apiKeyId: string;
  idempotencyKey?: string;
  input: PriceInput;
}

/** The quote document as JSON text: the text stored for an idempotent replay is the text answered. */
export interface QuoteResult {
  quoteText: string;
  replayed: boolean;
}

/** A quote document's fields that differ from one quote of the same input to the next. */
type QuoteFields = Record<'id' | 'evaluation_id' | 'created_at' | 'expires_at_quote', string>;

/** Validate → evaluate → record (audit + quote, one round trip) → respond. A quote creates no order. */
interface QuoteWrite {
  id: string;
  api_key_id: string;
  idempotency_key: string | null;
  request_hash: string;
  product_id: string;
  configuration: Record<string, unknown>;
  amount_atomic: string;
  response: string | null;
  expires_at: string;
  evaluation_id: string;
  snapshot_hash: string;
  record: string;
  record_hash: string;
}

/** request_hash and response are those of an earlier quote (when not created); a created quote's come back null. */
type WriteResult = { created: boolean; revoked: boolean; request_hash: string; response: string };

export class QuoteService {
  private readonly writer: BatchedCalls<QuoteWrite, WriteResult>;
  private readonly pricedInputs = new PricedInputs<(fields: QuoteFields) => string>((snapshot, input, priced) => ({
    priced,
    record: priceRecordText(snapshot.hash, input, priced),
    document: quoteDocumentText(priced, snapshot, input.billing),
  }));

  constructor(
    private readonly db: Database,
    private readonly live: LiveSnapshot,
    private readonly audit: AuditLog,
    private readonly now = () => new Date(),
  ) {
    this.writer = new BatchedCalls<QuoteWrite, WriteResult>(async (items) => {
      const rows = await this.db.query<WriteResult & { idx: number }>(
        recordQuotesCall(items.length),
        recordQuotesParameters(items),
      );
      const byPosition: WriteResult[] = [];
      for (const row of rows) byPosition[row.idx] = row;
      return items.map((_, i) => byPosition[i]);
    });
  }

  async create(request: QuoteRequest): Promise<QuoteResult> {
    const inputText = canonicalJson(request.input);
    const requestHash = sha256(inputText);
    if (request.idempotencyKey) {
      const [existing] = await this.db.query<{ request_hash: string; response: string }>(
        `SELECT q.request_hash, q.response FROM quotes q JOIN api_keys k ON k.id = q.api_key_id AND k.revoked_at IS NULL
         WHERE q.api_key_id = $1 AND q.idempotency_key = $2`,
        [request.apiKeyId, request.idempotencyKey],
      );
      if (existing) return replay(existing, requestHash);
    }

    const snapshot = this.live.current;
    const evaluated = await this.pricedInputs.of(snapshot, request.input, inputText);
    if ('outcome' in evaluated) throw refusal(evaluated, request.input.product_id);
    const { priced, record, document } = evaluated;
    await this.audit.saveSnapshot(snapshot);

    const createdAt = this.now();
    const ttlSeconds = Number(priced.product.pricing.quote_ttl_seconds ?? 300);
    const fields: QuoteFields = {
      id: randomId('qt_'),
      evaluation_id: randomId('ev_', 12),
      created_at: createdAt.toISOString(),
      expires_at_quote: new Date(createdAt.getTime() + ttlSeconds * 1000).toISOString(),
    };
    const quoteText = document(fields);
    const { text, hash } = record(fields.evaluation_id, createdAt);
    const row = await this.writer.call({
      id: fields.id,
      api_key_id: request.apiKeyId,
      idempotency_key: request.idempotencyKey ?? null,
      request_hash: requestHash,
      product_id: priced.output.product_id,
      configuration: priced.output.configuration,
      amount_atomic: priced.output.total_atomic,
      // Kept only to answer a repeat of the Idempotency-Key; the record is the quote's evidence.
      response: request.idempotencyKey ? quoteText : null,
      expires_at: fields.expires_at_quote,
      evaluation_id: fields.evaluation_id,
      snapshot_hash: snapshot.hash,
      record: text,
      record_hash: hash,
    });
    if (row.revoked) throw new KeyRevoked();
    if (!row.created) return replay(row, requestHash);
    return { quoteText, replayed: false };
  }
}

/**
 * record_quotes (migration 027) with each quote's record text and response as a parameter of its own: sent as they
 * are, not escaped inside the batch's JSON and parsed again by PostgreSQL.
 */
function recordQuotesCall(count: number): string {
  const texts = (first: number) => Array.from({ length: count }, (_, i) => `$${first + i}::text`).join(', ');
  return `SELECT * FROM record_quotes($1, ARRAY[${texts(2)}], ARRAY[${texts(2 + count)}])`;
}

function recordQuotesParameters(items: QuoteWrite[]): (string | null)[] {
  const fields = items.map(({ record: _record, response: _response, ...rest }) => rest);
  return [JSON.stringify(fields), ...items.map((q) => q.record), ...items.map((q) => q.response)];
}

function replay(existing: { request_hash: string; response: string }, requestHash: string): QuoteResult {
  if (existing.request_hash !== requestHash) {
    throw new ApiError(
      409,
      'idempotency_key_reused',
      'This Idempotency-Key was already used for a different quote request. Use a new Idempotency-Key for a new request, or repeat the original body to get the original quote back.',
    );
  }
  return { quoteText: existing.response, replayed: true };
}

function refusal(refused: Refused, productId: string): ApiError {
  switch (refused.outcome) {
    case 'unknown_product':
      return new ApiError(
        404,
        'product_not_found',
        `There is no product ${productId}. List the products with GET /products and use one of their ids.`,
      );
    case 'rejected': {
      const { status, code, message, pointer } = refused.rejection;
      const details = refused.problems ?? (pointer ? [{ pointer, code, message }] : undefined);
      return new ApiError(status, code, message, {
        details: details?.map(({ pointer: p, code: c, message: m }) => ({ pointer: p, code: c, message: m })),
      });
    }
  }
}

/** The quote document's JSON text, but for the fields each quote has of its own (QuoteFields). */
function quoteDocumentText(
  priced: Priced,
  snapshot: Snapshot,
  billing?: PriceInput['billing'],
): (fields: QuoteFields) => string {
  return TextTemplate.reused(['id', 'evaluation_id', 'created_at', 'expires_at_quote'], (fields) =>
    JSON.stringify(quoteDocument(fields, priced, snapshot, billing)),
  );
}

function quoteDocument(fields: QuoteFields, priced: Priced, snapshot: Snapshot, billing?: PriceInput['billing']) {
  const { product, output } = priced;
  const outOfRange = outsideOrderLimits(output.total_atomic, snapshot);
  const notOrderable = [...output.not_orderable_reasons, ...(outOfRange ? [outOfRange] : [])];
  return {
    id: fields.id,
    product: {
      id: product.id,
      name: product.name,
      type: product.type,
      billing_type: product.billing_type,
      pricing_model: product.pricing.model,
    },
    configuration: output.configuration,
    ...(billing && { billing }),
    price: {
      amount: output.amount,
      amount_atomic: output.total_atomic,
      currency: 'USDC' as const,
      decimals: 6 as const,
    },
    currency: 'USDC' as const,
    breakdown: output.lines.map((line) => withExchangeRate(line, snapshot)),
    formula: product.pricing.formula,
    transfer_policy: product.pricing.transfer_policy,
    created_at: fields.created_at,
    expires_at_quote: fields.expires_at_quote,
    pricing_status: product.pricing_status,
    agent_orderable: notOrderable.length === 0,
    ...(notOrderable.length === 0 ? {} : { agent_orderable_reasons: notOrderable }),
    audit: { evaluation_id: fields.evaluation_id, catalog_hash: snapshot.hash },
  };
}

/**
 * A line priced in another currency (e.g. 6.9 EUR for a month) says which rate turned it into USDC and where that rate
 * comes from: the catalog's exchange_rates, the same the order's 402 is priced with.
 */
function withExchangeRate(line: PriceLine, snapshot: Snapshot): PriceLine & { exchange_rate?: Record<string, string> } {
  const pair = `${line.unit}_USDC`;
  const rate = snapshot.catalog.settings.exchange_rates[pair];
  if (rate === undefined) return line;
  return {
    ...line,
    exchange_rate: {
      pair,
      rate,
      source: `catalog settings exchange_rates.${pair} (catalog/catalog.yaml)`,
      catalog_hash: snapshot.hash,
    },
  };
}

/** An order must cost within the catalog's order limits (as priceOrder checks it): a quote says so before the 402 does. */
function outsideOrderLimits(totalAtomic: string, snapshot: Snapshot): { code: string; reason: string } | undefined {
  const { minimum, maximum, currency } = snapshot.catalog.settings.order_limits;
  const amount = new Decimal(totalAtomic).dividedBy(1_000_000);
  if (!amount.lessThan(minimum) && !amount.greaterThan(maximum)) return undefined;
  return {
    code: 'amount_out_of_range',
    reason: `This configuration costs ${amount.toFixed()} USDC; agent orders must cost between ${minimum} and ${maximum} ${currency}.`,
  };
}
