import { getAddress, toEventSelector, type Hex } from 'viem';
import type { RefundInput, RefundPayment } from '../pricing/index.js';
import { Decimal } from '../rules/index.js';
import type { Client } from '../store/index.js';

const HOUR_MS = 3_600_000;
const TRANSFER = toEventSelector('Transfer(address,address,uint256)');

/** One payment for a service as the database holds it (hours: an upgrade's are the target hours it was priced for). */
export interface PaidRow {
  id: string;
  kind: RefundPayment['kind'];
  amount_atomic: string;
  hours: string | null;
  payer: string;
  settlement: { proof?: { logs?: Array<{ topics?: string[] }> } } | null;
  /** The order's base fee, as its own price evaluation charged it (null or absent: not known, or not the order). */
  base_atomic?: string | null;
}

/** What a stopped service's refund is computed from: each payment for it, the hours it paid for and the hours unused. */
export async function stopTerms(
  client: Client,
  refundId: string,
  service: {
    id: string;
    order_id: string;
    product_id: string;
    expires_at: Date | null;
    usage: Record<string, unknown> | null;
  },
  stoppedAt: Date,
): Promise<{ input: Omit<RefundInput, 'refunded_atomic'>; orderIds: string[]; payer: string | null }> {
  // The hours an upgrade paid for are the target hours of its own evaluation (what was left of the service then); the
  // order's base fee is the base line of its own price evaluation (what it was charged, whatever the catalog says now).
  const { rows } = await client.query(
    `SELECT o.id, CASE WHEN o.id = $1 THEN 'order' WHEN o.upgrade_of = $2 THEN 'upgrade' ELSE 'extension' END AS kind,
            o.amount_atomic::text AS amount_atomic, o.payer, o.settlement,
            CASE WHEN o.upgrade_of = $2 THEN r.record::jsonb #>> '{target,input,parameters,duration_hours}'
                 ELSE o.configuration ->> 'duration_hours' END AS hours,
            CASE WHEN o.id = $1 AND r.id IS NOT NULL THEN COALESCE(
              (SELECT l ->> 'amount_atomic' FROM jsonb_array_elements(r.record::jsonb #> '{output,lines}') l
               WHERE l ->> 'code' = 'base' LIMIT 1), '0') END AS base_atomic
     FROM orders o LEFT JOIN audit_records r ON r.id = o.evaluation_id
     WHERE o.state = 'active' AND (o.id = $1 OR o.upgrade_of = $2 OR o.extension_of = $2) ORDER BY o.created_at, o.id`,
    [service.order_id, service.id],
  );
  const paid = rows as PaidRow[];
  const payments = paymentsOf(paid, service.expires_at, stoppedAt);
  const first = paid.find((p) => p.kind === 'order') ?? paid[0];
  return {
    input: {
      refund_id: refundId,
      service_id: service.id,
      product_id: service.product_id,
      reason: 'stopped',
      as_of: stoppedAt.toISOString(),
      payments,
      transfer_used_gb: String(service.usage?.transfer_used_gb ?? '0'),
    },
    orderIds: paid.map((p) => p.id),
    payer: first ? payerOf(first) : null,
  };
}

/** An order that was paid and never provisioned: everything it paid comes back. */
export function failureTerms(
  refundId: string,
  order: PaidRow & { product_id: string; extension_of?: string | null; upgrade_of?: string | null },
  serviceId: string | null,
  asOf: Date,
): { input: Omit<RefundInput, 'refunded_atomic'>; payer: string } {
  return {
    input: {
      refund_id: refundId,
      service_id: serviceId,
      product_id: order.product_id,
      reason: 'provisioning_failed',
      as_of: asOf.toISOString(),
      payments: [
        {
          order_id: order.id,
          kind: order.kind,
          amount_atomic: order.amount_atomic,
          hours: String(order.hours ?? '0'),
          unused_hours: String(order.hours ?? '0'),
          payer: payerOf(order),
        },
      ],
      transfer_used_gb: '0',
    },
    payer: payerOf(order),
  };
}

/**
 * The service's paid time ends at expires_at. Extensions are its last hours, each after the one before; the order and
 * each upgrade cover the time up to the expiry as it was when they were bought, that is up to where the extensions
 * bought after them begin (an upgrade bought after an extension covers the extension's hours too: it was priced for
 * them). So every payment's hours end at expires_at less the hours of the extensions bought after it, and its unused
 * hours are those of its own hours after the stop, in millionths of an hour rounded down. Counting back from the end
 * also holds when the service was extended after it expired: the time it stood expired lies before its last
 * extension was bought, so before the stop.
 */
export function paymentsOf(paid: PaidRow[], expiresAt: Date | null, stoppedAt: Date): RefundPayment[] {
  const end = new Decimal(expiresAt?.getTime() ?? stoppedAt.getTime());
  const now = new Decimal(stoppedAt.getTime());
  let extendedAfter = new Decimal(0);
  const unused = new Array<Decimal>(paid.length);
  for (let i = paid.length - 1; i >= 0; i--) {
    const hours = hoursOf(paid[i]);
    const periodEnd = end.minus(extendedAfter.times(HOUR_MS));
    const leftMs = Decimal.max(0, periodEnd.minus(now));
    unused[i] = Decimal.min(hours, leftMs.dividedBy(HOUR_MS)).toDecimalPlaces(6, Decimal.ROUND_DOWN);
    if (paid[i].kind === 'extension') extendedAfter = extendedAfter.plus(hours);
  }
  return paid.map((p, i) => ({
    order_id: p.id,
    kind: p.kind,
    amount_atomic: p.amount_atomic,
    hours: hoursOf(p).toFixed(),
    unused_hours: unused[i].toFixed(),
    ...(p.kind === 'order' && p.base_atomic != null && { base_atomic: p.base_atomic }),
    payer: payerOf(p),
  }));
}

function hoursOf(p: PaidRow): Decimal {
  const hours = p.hours === null ? new Decimal(0) : new Decimal(p.hours);
  return hours.isFinite() && hours.greaterThan(0) ? hours : new Decimal(0);
}

/** The address that paid, as the payment's own Transfer log names it (never anything the request says). */
export function payerOf(order: Pick<PaidRow, 'payer' | 'settlement'>): string {
  const transfer = order.settlement?.proof?.logs?.find((l) => l.topics?.[0]?.toLowerCase() === TRANSFER);
  const topic = transfer?.topics?.[1];
  return topic ? getAddress(`0x${topic.slice(-40)}` as Hex) : getAddress(order.payer as Hex);
}
