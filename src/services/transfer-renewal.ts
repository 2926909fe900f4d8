import { Decimal } from '../rules/index.js';
import type { Database } from '../store/index.js';
import type { ServiceRow } from './service-records.js';

/** What a renewal reads of a service's usage this pass (MountUsage). */
interface RenewalUsage {
  hlsBytesSent?: number;
}

/** What a renewal asks the meter (UsageMeter.listenerBytesEndedBy). */
interface EndedByMeter {
  listenerBytesEndedBy?(service: ServiceRow, at: Date): number | undefined;
}

/**
 * How long after a renewal the bytes of connections that ended before it may still be counted: a listener's
 * access-log line is read on the next poll, or waits up to 5 s for HAProxy's count; a minute leaves room for slow passes.
 */
export const RENEWAL_SETTLES_MS = 60_000;

/**
 * A renewal of the bought transfer (an upgrade) takes as its offset the bytes counted when it is paid. Bytes sent to
 * listeners before it belong to the old allowance: those of every listener connection that ended by the renewal, even
 * when the meter counts them after it (the listeners cut by a suspension: their access-log lines, HAProxy's counts),
 * and what was counted for listeners still connected then. So for a minute after a renewal each pass raises the offset
 * to the bytes of the listeners that had finished by then, as counted now, plus the HLS bytes served by the first pass
 * that saw the renewal (HLS is counted as it is served); the offset never goes down. The renewed allowance starts empty.
 */
export class TransferRenewals {
  /** The HLS bytes of a renewed service at the first pass that saw its renewal, per service and renewal time. */
  private readonly hlsAtRenewal = new Map<string, number>();

  /**
   * The services with the offsets of their renewals settled so far; the offsets that grew are saved. Services without
   * a recent renewal come back as they are.
   */
  async settle(
    db: Database,
    services: ServiceRow[],
    usages: ReadonlyArray<RenewalUsage | undefined>,
    meter: EndedByMeter,
    now = Date.now(),
  ): Promise<ServiceRow[]> {
    const raised: Array<{ id: string; offset_bytes: string; renewed_at: string }> = [];
    const settled = services.map((service, i) => {
      const offset = this.offsetOf(service, usages[i], meter, now);
      if (offset === undefined || !service.transfer_renewed_at) return service;
      raised.push({ id: service.id, offset_bytes: offset, renewed_at: service.transfer_renewed_at.toISOString() });
      return { ...service, transfer_offset_bytes: offset };
    });
    for (const key of this.hlsAtRenewal.keys())
      if (Number(key.slice(key.lastIndexOf('@') + 1)) < now - RENEWAL_SETTLES_MS) this.hlsAtRenewal.delete(key);
    if (raised.length)
      await db.query(
        `UPDATE services s SET transfer_offset_bytes = u.offset_bytes
         FROM jsonb_to_recordset($1::jsonb) AS u(id text, offset_bytes bigint, renewed_at timestamptz)
         WHERE s.id = u.id AND s.transfer_renewed_at = u.renewed_at AND s.transfer_offset_bytes < u.offset_bytes`,
        [JSON.stringify(raised)],
      );
    return settled;
  }

  /** The service's offset once the bytes that belong before its renewal are all in, when that is more than it holds. */
  private offsetOf(
    service: ServiceRow,
    usage: RenewalUsage | undefined,
    meter: EndedByMeter,
    now: number,
  ): string | undefined {
    const renewedAt = service.transfer_renewed_at;
    if (!usage || !renewedAt || now - renewedAt.getTime() > RENEWAL_SETTLES_MS) return undefined;
    const finished = meter.listenerBytesEndedBy?.(service, renewedAt);
    if (finished === undefined) return undefined;
    const key = `${service.id}@${renewedAt.getTime()}`;
    const hls = this.hlsAtRenewal.get(key) ?? usage.hlsBytesSent ?? 0;
    this.hlsAtRenewal.set(key, hls);
    const before = new Decimal(finished).plus(hls);
    return before.greaterThan(service.transfer_offset_bytes ?? 0) ? before.toFixed(0) : undefined;
  }
}
