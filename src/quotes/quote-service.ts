import { canonicalJson, priceRecord, sha256, type AuditLog } from '../audit/index.js';
import { randomId } from '../ids/index.js';
import { ApiError } from '../errors/index.js';
import { evaluatePrice, type LiveSnapshot, type PriceEvaluation, type PriceInput, type Snapshot } from '../pricing/index.js';
import { Decimal, type PriceLine } from '../rules/index.js';
import { KeyRevoked } from '../keys/index.js';
import { BatchedCalls, type Database } from '../store/index.js';

export interface QuoteRequest {
  apiKeyId: string;
  idempotencyKey?: string;
  input: PriceInput;
}

export interface QuoteResult {
  quote: Record<string, unknown>;
  replayed: boolean;
}

type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;

/** Validate → evaluate → record (audit + quote, one round trip) → respond. A quote creates no order. */
interface QuoteWrite {
  id: string;
  api_key_id: string;
  idempotency_key: string | null;
  request_hash: string;
  product_id: string;
  configuration: Record<string, unknown>;
  amount_atomic: string;
  response: string;
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

  constructor(private readonly db: Database, private readonly live: LiveSnapshot, private readonly audit: AuditLog, private readonly now = () => new Date()) {
    this.writer = new BatchedCalls<QuoteWrite, WriteResult>(async (items) => {
      const rows = await this.db.query<WriteResult & { idx: number }>(recordQuotesCall(items.length), recordQuotesParameters(items));
      const byPosition: WriteResult[] = [];
      for (const row of rows) byPosition[row.idx] = row;
      return items.map((_, i) => byPosition[i]);
    });
  }

  async create(request: QuoteRequest): Promise<QuoteResult> {
    const requestHash = sha256(canonicalJson(request.input));
    if (request.idempotencyKey) {
      const [existing] = await this.db.query<{ request_hash: string; response: string }>(
        `SELECT q.request_hash, q.response FROM quotes q JOIN api_keys k ON k.id = q.api_key_id AND k.revoked_at IS NULL
         WHERE q.api_key_id = $1 AND q.idempotency_key = $2`, [request.apiKeyId, request.idempotencyKey]);
      if (existing) return replay(existing, requestHash);
    }

    const snapshot = this.live.current;
    const evaluation = await evaluatePrice(snapshot, request.input);
    const priced = accepted(evaluation, request.input.product_id);
    await this.audit.saveSnapshot(snapshot);

    const createdAt = this.now();
    const evaluationId = randomId('ev_', 12);
    const quote = quoteDocument(randomId('qt_'), priced, evaluationId, snapshot, createdAt, request.input.billing);
    const { text, hash } = priceRecord(evaluationId, snapshot.hash, request.input, priced, createdAt);
    const row = await this.writer.call({
      id: quote.id,
      api_key_id: request.apiKeyId,
      idempotency_key: request.idempotencyKey ?? null,
      request_hash: requestHash,
      product_id: priced.output.product_id,
      configuration: priced.output.configuration,
      amount_atomic: priced.output.total_atomic,
      response: JSON.stringify(quote),
      expires_at: quote.expires_at_quote,
      evaluation_id: evaluationId,
      snapshot_hash: snapshot.hash,
      record: text,
      record_hash: hash,
    });
    if (row.revoked) throw new KeyRevoked();
    if (!row.created) return replay(row, requestHash);
    return { quote, replayed: false };
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

function recordQuotesParameters(items: QuoteWrite[]): string[] {
  const fields = items.map(({ record: _record, response: _response, ...rest }) => rest);
  return [JSON.stringify(fields), ...items.map((q) => q.record), ...items.map((q) => q.response)];
}

function replay(existing: { request_hash: string; response: string }, requestHash: string): QuoteResult {
  if (existing.request_hash !== requestHash) {
    throw new ApiError(409, 'idempotency_key_reused',
      'This Idempotency-Key was already used for a different quote request. Use a new Idempotency-Key for a new request, or repeat the original body to get the original quote back.');
  }
  return { quote: JSON.parse(existing.response), replayed: true };
}

function accepted(evaluation: PriceEvaluation, productId: string): Priced {
  switch (evaluation.outcome) {
    case 'priced':
      return evaluation;
    case 'unknown_product':
      throw new ApiError(404, 'product_not_found', `There is no product ${productId}. List the products with GET /products and use one of their ids.`);
    case 'rejected': {
      const { status, code, message, pointer } = evaluation.rejection;
      const details = evaluation.problems ?? (pointer ? [{ pointer, code, message }] : undefined);
      throw new ApiError(status, code, message, { details: details?.map(({ pointer: p, code: c, message: m }) => ({ pointer: p, code: c, message: m })) });
    }
  }
}

function quoteDocument(id: string, priced: Priced, evaluationId: string, snapshot: Snapshot, createdAt: Date, billing?: PriceInput['billing']) {
  const { product, output } = priced;
  const ttl = Number(product.pricing.quote_ttl_seconds ?? 300);
  const outOfRange = outsideOrderLimits(output.total_atomic, snapshot);
  const notOrderable = [...output.not_orderable_reasons, ...(outOfRange ? [outOfRange] : [])];
  return {
    id,
    product: { id: product.id, name: product.name, type: product.type, billing_type: product.billing_type, pricing_model: product.pricing.model },
    configuration: output.configuration,
    ...(billing && { billing }),
    price: { amount: output.amount, amount_atomic: output.total_atomic, currency: 'USDC' as const, decimals: 6 as const },
    currency: 'USDC' as const,
    breakdown: output.lines.map((line) => withExchangeRate(line, snapshot)),
    formula: product.pricing.formula,
    transfer_policy: product.pricing.transfer_policy,
    created_at: createdAt.toISOString(),
    expires_at_quote: new Date(createdAt.getTime() + ttl * 1000).toISOString(),
    pricing_status: product.pricing_status,
    agent_orderable: notOrderable.length === 0,
    ...(notOrderable.length === 0 ? {} : { agent_orderable_reasons: notOrderable }),
    audit: { evaluation_id: evaluationId, catalog_hash: snapshot.hash },
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
  return { ...line, exchange_rate: { pair, rate, source: `catalog settings exchange_rates.${pair} (catalog/catalog.yaml)`, catalog_hash: snapshot.hash } };
}

/** An order must cost within the catalog's order limits (as priceOrder checks it): a quote says so before the 402 does. */
function outsideOrderLimits(totalAtomic: string, snapshot: Snapshot): { code: string; reason: string } | undefined {
  const { minimum, maximum, currency } = snapshot.catalog.settings.order_limits;
  const amount = new Decimal(totalAtomic).dividedBy(1_000_000);
  if (!amount.lessThan(minimum) && !amount.greaterThan(maximum)) return undefined;
  return { code: 'amount_out_of_range', reason: `This configuration costs ${amount.toFixed()} USDC; agent orders must cost between ${minimum} and ${maximum} ${currency}.` };
}
