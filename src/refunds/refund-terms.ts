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
  // The hours an upgrade paid for are the target hours of its own evaluation (what was left of the service then).
  const { rows } = await client.query(
    `SELECT o.id, CASE WHEN o.id = $1 THEN 'order' WHEN o.upgrade_of = $2 THEN 'upgrade' ELSE 'extension' END AS kind,
            o.amount_atomic::text AS amount_atomic, o.payer, o.settlement,
            CASE WHEN o.upgrade_of = $2 THEN r.record::jsonb #>> '{target,input,parameters,duration_hours}'
                 ELSE o.configuration ->> 'duration_hours' END AS hours
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
 * The service's paid time ends at expires_at; extensions are its last hours (each after the one before), the order
 * and its upgrades cover the time before them. Each payment's unused hours are those of its own time after the stop.
 */
export function paymentsOf(paid: PaidRow[], expiresAt: Date | null, stoppedAt: Date): RefundPayment[] {
  const end = expiresAt?.getTime() ?? stoppedAt.getTime();
  const extensionMs = paid
    .filter((p) => p.kind === 'extension')
    .reduce((sum, p) => sum + hoursOf(p).times(HOUR_MS).toNumber(), 0);
  const baseEnd = end - extensionMs;
  let extensionStart = baseEnd;
  const now = stoppedAt.getTime();
  return paid.map((p) => {
    const hours = hoursOf(p);
    let unusedMs: number;
    if (p.kind === 'extension') {
      const periodEnd = extensionStart + hours.times(HOUR_MS).toNumber();
      unusedMs = Math.max(0, periodEnd - Math.max(now, extensionStart));
      extensionStart = periodEnd;
    } else {
      unusedMs = Math.max(0, baseEnd - now);
    }
    const unused = Decimal.min(hours, new Decimal(unusedMs).dividedBy(HOUR_MS)).toDecimalPlaces(6, Decimal.ROUND_DOWN);
    return {
      order_id: p.id,
      kind: p.kind,
      amount_atomic: p.amount_atomic,
      hours: hours.toFixed(),
      unused_hours: unused.toFixed(),
      payer: payerOf(p),
    };
  });
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
