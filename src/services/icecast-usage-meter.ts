import type { Logger } from '../log/index.js';
import {
  MountMeter,
  SourceBudget,
  SourceRateMonitor,
  type IcecastAdmin,
  type InternalListeners,
  type SourceBudgetOptions,
  type MeterPoll,
  type MountMeterState,
  type MountSnapshot,
  type SourceBudgetState,
  type HostStall,
} from '../provisioning/index.js';
import { reportedByProxy, type ListenerEnd } from '../provisioning/listener-end.js';
import type { SourceEnd } from '../provisioning/source-end.js';
import type { Database } from '../store/index.js';
import type { MountUsage, UsageMeter } from './lifecycle-worker.js';
import { ListenerSessions } from './listener-sessions.js';
import { RecentListenerEnds } from './recent-listener-ends.js';
import type { NowPlaying } from './now-playing.js';
import type { ServiceRow } from './service-records.js';

/** What an IcecastUsageMeter reads: its Icecast's stats and access log, and where it keeps its state. */
export interface IcecastUsageMeterOptions {
  db: Database;
  /** The key of its saved state (meter_state.icecast_url): the host's id, which survives a change of address. */
  icecastUrl: () => string;
  admin: () => IcecastAdmin | undefined;
  accessLogPath: () => string | undefined;
  log: Logger;
  /** Each service's source bitrate budget. */
  budget?: SourceBudgetOptions;
  /** Live encoders' titles, read from the same stats. */
  nowPlaying?: NowPlaying;
  /** Our own readers of the mounts (the HLS segmenter), left out of listeners and bytes sent. */
  internal?: InternalListeners;
}

/**
 * Usage of every mount of one Icecast: stats deltas across source reconnects, exact listener bytes from the access log,
 * and each service's source bitrate budget (SourceBudget, per service, so it survives reconnects; its state is saved
 * with the usage).
 */
export class IcecastUsageMeter implements UsageMeter {
  private meter?: MountMeter;
  /** For the measured kbps shown in the usage; the budget decides. */
  private readonly rates = new SourceRateMonitor();
  private polledAt = Date.now();
  /** Polls failed in a row: one alone is logged at debug level (see poll). */
  private failedPolls = 0;
  /** The latest time Icecast's stats went unanswered, once they are read again (SourceBudget's stall credit). */
  private stall?: HostStall;
  /** The listeners this process counted as finished lately, by when they ended (see listenerBytesEndedBy). */
  private recentEnds?: RecentListenerEnds;
  /** When the meter's state was last saved, and its sources' sessions then. */
  private saved?: { at: number; shape: string; counters: string };
  /** What the last successful poll listed of each live mount's clients (MeterPoll.connected). */
  private connected?: ReadonlyMap<string, string[] | null>;

  private readonly db: Database;
  private readonly icecastUrl: () => string;
  private readonly admin: () => IcecastAdmin | undefined;
  private readonly accessLogPath: () => string | undefined;
  private readonly log: Logger;
  private readonly nowPlaying?: NowPlaying;
  private readonly budget: SourceBudget;
  private readonly internal?: InternalListeners;

  constructor(options: IcecastUsageMeterOptions) {
    this.db = options.db;
    this.icecastUrl = options.icecastUrl;
    this.admin = options.admin;
    this.accessLogPath = options.accessLogPath;
    this.log = options.log;
    this.nowPlaying = options.nowPlaying;
    this.budget = new SourceBudget(options.budget ?? {});
    this.internal = options.internal;
  }

  async poll(): Promise<boolean> {
    const admin = this.admin();
    if (!admin) return false;
    try {
      const meter = this.meter ?? (this.meter = await this.restore());
      this.recentEnds ??= new RecentListenerEnds(this.internal);
      this.connected = undefined;
      const poll = await meter.poll();
      const previousPoll = this.polledAt;
      this.connected = poll.connected;
      this.recentEnds.record(poll.entries, poll.at);
      this.rates.observe(poll.stats, poll.at);
      this.polledAt = poll.at;
      if (this.mustSave(poll, meter))
        // The listeners' sessions get their bytes in the transaction that moves the access log's position past them.
        await this.db.transaction(async (client) => {
          const state = meter.toJSON();
          await client.query(
            `INSERT INTO meter_state (icecast_url, state) VALUES ($1, $2)
             ON CONFLICT (icecast_url) DO UPDATE SET state = $2, updated_at = now()`,
            [this.icecastUrl(), state],
          );
          await ListenerSessions.attribute(client, poll.entries);
          this.saved = { at: poll.at, shape: shapeOf(poll), counters: countersOf(state) };
        });
      await this.nowPlaying
        ?.observe(poll.stats)
        .catch((err) => this.log.warn({ err }, 'could not record what plays now'));
      if (this.failedPolls > 1) this.log.info({ failed_in_a_row: this.failedPolls }, 'Icecast usage is read again');
      if (this.failedPolls > 0) this.stall = { from: previousPoll, to: poll.at };
      this.failedPolls = 0;
      return true;
    } catch (err) {
      // One failed read is no news: Icecast restarting, or stopped a moment before serve by a Ctrl-C to the whole
      // process group. A second in a row is.
      this.failedPolls += 1;
      const fields = { err, failed_in_a_row: this.failedPolls };
      const message = 'could not read Icecast usage; the last known usage stands';
      if (this.failedPolls > 1) this.log.warn(fields, message);
      else this.log.debug?.(fields, message);
      return false;
    }
  }

  /**
   * The clients Icecast listed on each live mount in the last poll (null: not listed again, or unknown); undefined
   * when that poll failed. A mount absent has no source.
   */
  icecastClients(): ReadonlyMap<string, string[] | null> | undefined {
    return this.connected;
  }

  /** Saves the state of the last poll (at shutdown, once no poll runs). */
  async save(): Promise<void> {
    if (!this.meter) return;
    await this.db.query(
      `INSERT INTO meter_state (icecast_url, state) VALUES ($1, $2)
       ON CONFLICT (icecast_url) DO UPDATE SET state = $2, updated_at = now()`,
      [this.icecastUrl(), this.meter.toJSON()],
    );
  }

  /**
   * Whether this poll's state is saved: listeners finished (their sessions get their bytes with the log's position),
   * a source came or went, or the last save is STATE_SAVE_MS old. A state saved a few polls ago is as good to restart
   * from: its counters and the log position it holds go together, and Icecast's counters are totals of each source
   * session, so what came after it is counted again from them.
   */
  private mustSave(poll: MeterPoll, meter: MountMeter): boolean {
    const saved = this.saved;
    if (!saved || poll.entries.length > 0 || shapeOf(poll) !== saved.shape) return true;
    if (poll.at - saved.at < STATE_SAVE_MS) return false;
    // Nothing connected and no counter moved since the last save: the saved state is this one (its poll time aside,
    // which counts nothing while nobody is connected). Looked at again STATE_SAVE_MS later.
    const idle = poll.snapshots.every((s) => !s.sourceConnected && s.listeners === 0);
    if (idle && countersOf(meter.toJSON()) === saved.counters) {
      this.saved = { ...saved, at: poll.at };
      return false;
    }
    return true;
  }

  /** The proxy's exact bytes of a source connection that closed (MountMeter.sourceEnded). */
  sourceEnded(end: SourceEnd): void {
    this.meter?.sourceEnded(end);
  }

  /** The bytes HAProxy sent a listener that left: its finished line's figure (MountMeter.listenerEnded). */
  listenerEnded(end: ListenerEnd): void {
    this.meter?.listenerEnded(end);
  }

  /**
   * Bytes counted for the mount's finished listeners whose connection ended by `at` (their access-log lines: a cut
   * listener's come after the cut), while this process still keeps what it counted after `at`.
   */
  listenerBytesEndedBy(service: ServiceRow, at: Date): number | undefined {
    const finished = this.meter?.snapshot(service.mount)?.finishedListenerBytes ?? 0;
    const after = this.recentEnds?.endedAfter(service.mount, at.getTime());
    return after === undefined || !this.accessLogPath() ? undefined : finished - after;
  }

  usage(service: ServiceRow): MountUsage {
    const s = this.meter?.snapshot(service.mount) as MountSnapshot | undefined;
    const rate = this.rates.rate(service.mount);
    const bought = Number(service.limits.bitrate_kbps ?? 0);
    const budget =
      bought > 0 && s
        ? this.budget.observe(service.id, bought, s.bytesRead, this.polledAt, {
            restored: savedBudget(service),
            stall: this.stall,
          })
        : undefined;
    return {
      listeners: s?.listeners ?? 0,
      peakListeners: s?.peakListeners ?? 0,
      listenerSeconds: s?.listenerSeconds ?? 0,
      bytesSent: s?.bytesSent ?? 0,
      bytesRead: s?.bytesRead ?? 0,
      sourceConnected: s?.sourceConnected ?? false,
      sourceSince: s?.sourceConnected ? s.sourceSince : null,
      sourceKbps:
        rate?.bytesPerSecond === undefined || rate.bytesPerSecond === null
          ? null
          : Math.round((rate.bytesPerSecond * 8) / 100) / 10,
      sourceOverBitrate: budget?.over ?? false,
      ...(budget && {
        sourceBudget: {
          windowSeconds: this.budget.windowSeconds,
          tolerance: this.budget.tolerance,
          capacityBytes: Math.round(budget.capacity),
          state: {
            level: Math.round(budget.level),
            bytesRead: budget.bytesRead,
            at: budget.at,
            over: budget.over,
            ...(budget.stallCredit && { stallCredit: budget.stallCredit }),
          },
          refusedUntil: budget.refusedUntil === null ? null : new Date(budget.refusedUntil).toISOString(),
        },
      }),
    };
  }

  private async restore(): Promise<MountMeter> {
    const [row] = await this.db.query<{ state: MountMeterState }>(
      'SELECT state FROM meter_state WHERE icecast_url = $1',
      [this.icecastUrl()],
    );
    const admin = {
      stats: (mount?: string) => this.admin()!.stats(mount),
      listClients: (mount: string) => this.admin()!.listClients(mount),
    };
    const state = row && { state: row.state };
    return new MountMeter({
      admin,
      accessLogPath: this.accessLogPath(),
      internal: this.internal,
      reportedByProxy,
      ...state,
    });
  }
}

/** At most this long between two saves of the meter's state while nothing but its counters changes. */
const STATE_SAVE_MS = 5000;

/** The meter's state less the time of its last poll. */
function countersOf(state: MountMeterState): string {
  return JSON.stringify({ ...state, lastPollAt: undefined });
}

/** The sources' sessions a poll saw: a mount's source that came, went or reconnected changes it. */
function shapeOf(poll: MeterPoll): string {
  return poll.snapshots.map((s) => `${s.mount} ${s.sourceConnected} ${s.sourceSessions}`).join('\n');
}

/** The budget saved with the service's last usage (see usageFactsOf), to carry on from it after a restart. */
function savedBudget(service: ServiceRow): SourceBudgetState | undefined {
  const saved = (service.usage?.source_budget as { state?: SourceBudgetState } | undefined)?.state;
  return saved && typeof saved === 'object' ? saved : undefined;
}
