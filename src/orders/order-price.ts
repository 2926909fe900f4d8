import { canonicalJson } from '../audit/index.js';
import { ApiError } from '../errors/index.js';
import { evaluatePrice, type PriceEvaluation, type Snapshot } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import { refusedUrlParameters } from '../ssrf/index.js';
import type { Database } from '../store/index.js';

export interface OrderRequest {
  product_id: string;
  billing: 'monthly' | 'annual' | 'one_time' | 'quote';
  quantity: 1;
  contact_name?: string;
  email: string;
  station_name: string;
  parameters?: Record<string, unknown>;
  metadata?: Record<string, string>;
}

export type Priced = Extract<PriceEvaluation, { outcome: 'priced' }>;

export interface OrderPrice {
  priced: Priced;
  amountAtomic: string;
  quoteId?: string;
}

/** The amount this exact order request costs: the rules' price, or a live quote's locked price. */
export async function priceOrder(
  snapshot: Snapshot,
  request: OrderRequest,
  apiKeyId: string,
  db: Database,
): Promise<OrderPrice> {
  const verdict = snapshot.verdicts.get(request.product_id);
  if (!verdict)
    throw new ApiError(
      404,
      'product_not_found',
      `There is no product ${request.product_id}. GET /api/v1/products lists the product ids.`,
    );
  if (verdict.notOrderable.length) {
    throw new ApiError(
      409,
      'product_not_orderable',
      `Agents cannot order ${request.product_id}: ${verdict.notOrderable.map((r) => r.reason).join(' ')} GET /api/v1/availability lists what can be ordered now.`,
      { details: verdict.notOrderable },
    );
  }
  const evaluation = await evaluatePrice(snapshot, {
    product_id: request.product_id,
    parameters: request.parameters ?? {},
    billing: request.billing,
  });
  if (evaluation.outcome === 'unknown_product')
    throw new ApiError(404, 'product_not_found', `There is no product ${request.product_id}.`);
  if (evaluation.outcome === 'rejected') {
    const { status, code, message, pointer } = evaluation.rejection;
    const details = evaluation.problems ?? (pointer ? [{ pointer, code, message }] : undefined);
    throw new ApiError(status, code, message, {
      details: details?.map(({ pointer: p, code: c, message: m }) => ({ pointer: p, code: c, message: m })),
    });
  }

  const refused = await refusedUrlParameters(evaluation.product, evaluation.output.configuration);
  if (refused.length) {
    throw new ApiError(
      422,
      'url_not_allowed',
      `${refused.map((r) => r.message).join('; ')}. Give a public http or https URL without credentials.`,
      { details: refused },
    );
  }

  let amountAtomic = evaluation.output.total_atomic;
  const quoteId = request.metadata?.quote_id;
  if (quoteId !== undefined) amountAtomic = await lockedPrice(db, quoteId, apiKeyId, evaluation);

  const { minimum, maximum } = snapshot.catalog.settings.order_limits;
  const amount = new Decimal(amountAtomic).dividedBy(1_000_000);
  if (amount.lessThan(minimum) || amount.greaterThan(maximum)) {
    throw new ApiError(
      409,
      'amount_out_of_range',
      `This order would cost ${amount.toFixed()} USDC; agent orders must cost between ${minimum} and ${maximum} USD. ${request.billing === 'annual' ? 'Choose billing monthly instead.' : 'Change the parameters.'}`,
    );
  }
  return { priced: evaluation, amountAtomic, ...(quoteId !== undefined && { quoteId }) };
}

async function lockedPrice(db: Database, quoteId: string, apiKeyId: string, evaluation: Priced): Promise<string> {
  const [quote] = await db.query<{
    product_id: string;
    configuration: unknown;
    amount_atomic: string;
    expires_at: Date;
  }>(
    'SELECT product_id, configuration, amount_atomic::text, expires_at FROM quotes WHERE id = $1 AND api_key_id = $2',
    [quoteId, apiKeyId],
  );
  if (!quote)
    throw new ApiError(
      422,
      'quote_not_found',
      `metadata.quote_id ${quoteId.slice(0, 80)} is not a quote of this API key. Ask POST /quotes for a new quote, or leave quote_id out to pay the current price.`,
      { details: [{ pointer: '/metadata/quote_id', code: 'quote_not_found', message: 'unknown quote' }] },
    );
  if (quote.expires_at.getTime() <= Date.now())
    throw new ApiError(
      409,
      'quote_expired',
      `Quote ${quoteId} expired at ${quote.expires_at.toISOString()}. Ask POST /quotes for a new one and order within its expires_at_quote.`,
    );
  if (
    quote.product_id !== evaluation.output.product_id ||
    canonicalJson(quote.configuration) !== canonicalJson(evaluation.output.configuration)
  ) {
    throw new ApiError(
      409,
      'quote_mismatch',
      `Quote ${quoteId} was for another product or configuration. Order exactly the quoted configuration (quote.configuration) or leave quote_id out.`,
    );
  }
  return quote.amount_atomic;
}
