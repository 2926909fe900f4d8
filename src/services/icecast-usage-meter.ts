import type { Logger } from '../log/index.js';
import { MountMeter, SourceRateMonitor, type IcecastAdmin, type MountMeterState, type MountSnapshot } from '../provisioning/index.js';
import type { Database } from '../store/index.js';
import type { MountUsage, UsageMeter } from './lifecycle-worker.js';
import type { ServiceRow } from './service-records.js';

/** Usage of every mount of one Icecast: stats deltas across source reconnects, exact listener bytes from the access log. */
export class IcecastUsageMeter implements UsageMeter {
  private meter?: MountMeter;
  private readonly rates = new SourceRateMonitor();

  constructor(
    private readonly db: Database,
    private readonly icecastUrl: () => string,
    private readonly admin: () => IcecastAdmin | undefined,
    private readonly accessLogPath: () => string | undefined,
    private readonly log: Logger,
  ) {}

  async poll(): Promise<boolean> {
    const admin = this.admin();
    if (!admin) return false;
    try {
      const meter = this.meter ?? (this.meter = await this.restore());
      const poll = await meter.poll();
      this.rates.observe(poll.stats, poll.at);
      await this.db.query(
        'INSERT INTO meter_state (icecast_url, state) VALUES ($1, $2) ON CONFLICT (icecast_url) DO UPDATE SET state = $2, updated_at = now()',
        [this.icecastUrl(), meter.toJSON()]);
      return true;
    } catch (err) {
      this.log.warn({ err }, 'could not read Icecast usage; the last known usage stands');
      return false;
    }
  }

  usage(service: ServiceRow): MountUsage {
    const s = this.meter?.snapshot(service.mount) as MountSnapshot | undefined;
    const rate = this.rates.rate(service.mount);
    const bought = Number(service.limits.bitrate_kbps ?? 0);
    return {
      listeners: s?.listeners ?? 0,
      peakListeners: s?.peakListeners ?? 0,
      listenerSeconds: s?.listenerSeconds ?? 0,
      bytesSent: s?.bytesSent ?? 0,
      bytesRead: s?.bytesRead ?? 0,
      sourceConnected: s?.sourceConnected ?? false,
      sourceSince: s?.sourceConnected ? s.sourceSince : null,
      sourceKbps: rate?.bytesPerSecond === undefined || rate.bytesPerSecond === null ? null : Math.round(rate.bytesPerSecond * 8 / 100) / 10,
      sourceOverBitrate: bought > 0 && this.rates.overLimit(service.mount, bought),
    };
  }

  private async restore(): Promise<MountMeter> {
    const [row] = await this.db.query<{ state: MountMeterState }>('SELECT state FROM meter_state WHERE icecast_url = $1', [this.icecastUrl()]);
    const admin = {
      stats: (mount?: string) => this.admin()!.stats(mount),
      listClients: (mount: string) => this.admin()!.listClients(mount),
    };
    return new MountMeter({ admin, accessLogPath: this.accessLogPath(), ...(row && { state: row.state }) });
  }
}
