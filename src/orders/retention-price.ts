import { ApiError } from '../errors/index.js';
import { evaluatePrice, type PriceInput, type Snapshot } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import type { Priced } from './order-price.js';

/** The product that keeps recordings past their service: sold per service, never as an order of its own. */
export const RETENTION_PRODUCT = 'audio-storage-api';

const GIB = 1024 ** 3;

/** The GiB a retention keeps: the recordings' bytes rounded up to whole GiB, at least one. */
export function storageGbOf(bytes: number): number {
  return Math.max(1, new Decimal(bytes).dividedBy(GIB).ceil().toNumber());
}

/**
 * The price of keeping recordings of `storageBytes` for `days`, by the rules of the retention product: its input is
 * an ordinary price input (storage_gb, retention_days and their product gb_days), replayed like any order's price.
 */
export async function priceRetention(
  snapshot: Snapshot,
  recordings: Array<{ size_bytes: number }>,
  days: number,
): Promise<{ input: PriceInput; priced: Priced; storageBytes: number }> {
  refuseUnlessOrderable(snapshot);
  checkDays(snapshot, days);
  const storageBytes = recordings.reduce((sum, r) => sum + r.size_bytes, 0);
  const storageGb = storageGbOf(storageBytes);
  const input: PriceInput = {
    product_id: RETENTION_PRODUCT,
    parameters: { storage_gb: storageGb, retention_days: days, gb_days: storageGb * days },
    billing: 'one_time',
  };
  const evaluation = await evaluatePrice(snapshot, input);
  if (evaluation.outcome === 'unknown_product') throw notSold('the catalog has no audio-storage-api product');
  if (evaluation.outcome === 'rejected') {
    const { status, code, message } = evaluation.rejection;
    throw new ApiError(status, code, `${message} Nothing was charged.`, {
      details: evaluation.problems?.map(({ pointer, code: c, message: m }) => ({ pointer, code: c, message: m })),
    });
  }
  refuseOutOfRange(snapshot, evaluation.output.total_atomic, storageGb, days);
  return { input, priced: evaluation, storageBytes };
}

/** POST /orders does not sell retention: it belongs to a service's recordings. */
export function refuseRetentionOrder(productId: string): void {
  if (productId !== RETENTION_PRODUCT) return;
  throw new ApiError(
    409,
    'product_not_orderable',
    `${RETENTION_PRODUCT} keeps the recordings of a service you own past its end: buy it with POST /services/{service_id}/recordings/retention (MCP: retain_recordings), not with POST /orders.`,
  );
}

/** The days asked, within the product's retention_days bounds (the catalog's). */
function checkDays(snapshot: Snapshot, days: number): void {
  const bounds = snapshot.catalog.byId.get(RETENTION_PRODUCT)?.acceptedParameters.retention_days;
  const { minimum = 1, maximum } = bounds ?? {};
  const outside = days < minimum ? { code: 'minimum', limit: minimum } : undefined;
  const over = maximum !== undefined && days > maximum ? { code: 'maximum', limit: maximum } : undefined;
  const problem = outside ?? over;
  if (!problem) return;
  const message = `must be ${problem.code === 'minimum' ? '>=' : '<='} ${problem.limit}`;
  throw new ApiError(
    422,
    'invalid_request',
    `retention_days ${message} (the ${RETENTION_PRODUCT} product's bounds); ${days} was asked. Nothing was charged.`,
    { details: [{ pointer: '/retention_days', code: problem.code, message, [problem.code]: problem.limit }] },
  );
}

function refuseUnlessOrderable(snapshot: Snapshot): void {
  const verdict = snapshot.verdicts.get(RETENTION_PRODUCT);
  if (!verdict) throw notSold('the catalog has no audio-storage-api product');
  if (verdict.notOrderable.length) throw notSold(verdict.notOrderable.map((r) => r.reason).join(' '));
}

function notSold(reason: string): ApiError {
  return new ApiError(
    409,
    'product_not_orderable',
    `Keeping recordings past the service (${RETENTION_PRODUCT}) is not sold now: ${reason} Nothing was charged.`,
  );
}

function refuseOutOfRange(snapshot: Snapshot, totalAtomic: string, storageGb: number, days: number): void {
  const { minimum, maximum } = snapshot.catalog.settings.order_limits;
  const amount = new Decimal(totalAtomic).dividedBy(1_000_000);
  if (!amount.lessThan(minimum) && !amount.greaterThan(maximum)) return;
  throw new ApiError(
    409,
    'amount_out_of_range',
    `Keeping ${storageGb} GB for ${days} days would cost ${amount.toFixed()} USDC; one payment must cost between ${minimum} and ${maximum} USD. Keep fewer recordings (recording_ids) or buy fewer days, several times: the days add up. Nothing was charged.`,
  );
}
