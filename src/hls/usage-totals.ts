import type { MountUsage, ServiceRow, UsageMeter } from '../services/index.js';
import type { Database } from '../store/index.js';
import type { HlsSessions } from './sessions.js';

interface Totals {
  bytes: number;
  listenerMs: number;
  sessions: number;
  peak: number;
}
type SavedRow = {
  service_id: string;
  bytes_sent: string;
  listener_ms: string;
  sessions: number;
  peak_listeners: number;
};
interface HlsUsage {
  listeners: number;
  peak: number;
  seconds: number;
  bytes: number;
}

/** How often the saved totals are read while nothing changes them here (no HLS listener on this host). */
const TOTALS_REREAD_MS = 30_000;

/**
 * What HLS listeners used per service: saved totals (hls_usage) + what is not saved yet + open sessions' time.
 * Saved on every life-cycle pass, before the usage is computed.
 */
export class HlsUsageTotals {
  private saved = new Map<string, Totals>();
  /** Combined peaks seen since the last save. */
  private readonly peaks = new Map<string, number>();
  /** The services asked about before the last read of the saved totals, and since. */
  private readFor = new Set<string>();
  private askedSince = new Set<string>();
  private readAt = 0;

  constructor(
    private readonly db: Database,
    private readonly sessions: HlsSessions,
    private readonly hostId: () => string,
  ) {}

  async save(): Promise<void> {
    const deltas = this.sessions.takeUsage();
    const peaks = new Map(this.peaks);
    this.peaks.clear();
    const changed = new Set([...deltas.keys(), ...peaks.keys()]);
    for (const id of changed) {
      const d = deltas.get(id) ?? { bytes: 0, listenerMs: 0, sessions: 0 };
      try {
        await this.db.query(
          `INSERT INTO hls_usage (service_id, bytes_sent, listener_ms, sessions, peak_listeners)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (service_id) DO UPDATE SET bytes_sent = hls_usage.bytes_sent + $2,
             listener_ms = hls_usage.listener_ms + $3, sessions = hls_usage.sessions + $4,
             peak_listeners = GREATEST(hls_usage.peak_listeners, $5), updated_at = now()`,
          [id, d.bytes, Math.round(d.listenerMs), d.sessions, peaks.get(id) ?? 0],
        );
      } catch (err) {
        this.sessions.restore(id, d);
        this.peaks.set(id, Math.max(this.peaks.get(id) ?? 0, peaks.get(id) ?? 0));
        throw err;
      }
    }
    if (!changed.size && !this.readDue()) return;
    this.readAt = Date.now();
    [this.readFor, this.askedSince] = [this.askedSince, new Set()];
    const rows = await this.db.query<SavedRow>(
      'SELECT h.* FROM hls_usage h JOIN services s ON s.id = h.service_id WHERE s.host_id = $1',
      [this.hostId()],
    );
    this.saved = new Map(
      rows.map((r) => [
        r.service_id,
        {
          bytes: Number(r.bytes_sent),
          listenerMs: Number(r.listener_ms),
          sessions: r.sessions,
          peak: r.peak_listeners,
        },
      ]),
    );
  }

  /**
   * Whether the saved totals are read again though this host saved nothing since: a service new here (bought, or
   * moved from a host that saved its totals) is read at once, and the rest every TOTALS_REREAD_MS.
   */
  private readDue(): boolean {
    if (Date.now() - this.readAt >= TOTALS_REREAD_MS) return true;
    for (const id of this.askedSince) if (!this.readFor.has(id)) return true;
    return false;
  }

  /** The service's HLS usage now, given its Icecast listeners now (for the combined peak). */
  of(serviceId: string, icecastListeners: number, icecastPeak: number): HlsUsage {
    this.askedSince.add(serviceId);
    const saved = this.saved.get(serviceId) ?? { bytes: 0, listenerMs: 0, sessions: 0, peak: 0 };
    const unsaved = this.sessions.unsaved(serviceId);
    const open = this.sessions.openOf(serviceId);
    const peak = Math.max(saved.peak, this.peaks.get(serviceId) ?? 0, icecastPeak, icecastListeners + open.count);
    if (peak > saved.peak) this.peaks.set(serviceId, peak);
    return {
      listeners: open.count,
      peak,
      seconds: (saved.listenerMs + unsaved.listenerMs + open.listenerMs) / 1000,
      bytes: saved.bytes + unsaved.bytes,
    };
  }
}

/** The mount's usage with its HLS listeners added: listeners, peak, listener time and bytes sent (transfer). */
export function withHlsUsage(meter: UsageMeter, totals: HlsUsageTotals): UsageMeter {
  return {
    async poll() {
      const fresh = await meter.poll();
      // Unsaved usage stays in memory for the next pass; the totals shown meanwhile are the last saved ones.
      if (fresh) await totals.save().catch(() => {});
      return fresh;
    },
    usage(service: ServiceRow): MountUsage | undefined {
      const usage = meter.usage(service);
      if (!usage) return usage;
      const hls = totals.of(service.id, usage.listeners, usage.peakListeners);
      return {
        ...usage,
        listeners: usage.listeners + hls.listeners,
        peakListeners: hls.peak,
        listenerSeconds: usage.listenerSeconds + hls.seconds,
        bytesSent: usage.bytesSent + hls.bytes,
        hlsBytesSent: hls.bytes,
      };
    },
    listenerBytesEndedBy: meter.listenerBytesEndedBy && ((service, at) => meter.listenerBytesEndedBy?.(service, at)),
  };
}
