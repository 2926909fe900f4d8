import {
  recordExpiringServices,
  recordListenerThreshold,
  recordStatusChange,
  type ExtendHint,
} from '../events/index.js';
import type { Logger } from '../log/index.js';
import type { LiveSnapshot } from '../catalog/live-snapshot.js';
import {
  listclientsLagMs,
  placeKey,
  PROXY_USER,
  type IcecastAdmin,
  type MountSnapshot,
  type SourceBudgetState,
} from '../provisioning/index.js';
import { Decimal, type ServiceAction, type ServiceDecision, type Stage } from '../rules/index.js';
import type { Client, Database } from '../store/index.js';
import { listenerCapOf, SERVICE_ROW_COLUMNS, type ServiceRow } from './service-records.js';
import { usageDecidingRules } from './decision-key.js';
import { hasAutoDj } from './has-autodj.js';
import type { ListenerPlaces } from './listener-places.js';
import { recordServiceEvent } from './service-events.js';
import { showServiceReason, transitionService, type ServiceStatus } from './service-transitions.js';
import { TransferRenewals } from './transfer-renewal.js';
import { usageWorthWriting } from './usage-write.js';
import { PeriodicTask } from '../tasks/index.js';

/** What Icecast says a mount used, cumulative over the service's life (counters survive source reconnects). */
export type MountUsage = Pick<
  MountSnapshot,
  'listeners' | 'peakListeners' | 'listenerSeconds' | 'bytesSent' | 'bytesRead' | 'sourceConnected' | 'sourceSince'
> & {
  sourceKbps: number | null;
  /** The part of bytesSent that HLS listeners took (counted as it is served). */
  hlsBytesSent?: number;
  /** The source's bitrate budget is used up: it is cut, and refused until refusedUntil. */
  sourceOverBitrate: boolean;
  sourceBudget?: {
    windowSeconds: number;
    tolerance: number;
    capacityBytes: number;
    state: SourceBudgetState;
    refusedUntil: string | null;
  };
};

export interface UsageMeter {
  /** Reads Icecast once; false when it could not be read (the last known usage then stands). */
  poll(): Promise<boolean>;
  usage(service: ServiceRow): MountUsage | undefined;
  /**
   * Bytes counted so far for the service's finished (non-HLS) listeners whose connection ended by `at`; undefined when
   * that can no longer be told (see TransferRenewals).
   */
  listenerBytesEndedBy?(service: ServiceRow, at: Date): number | undefined;
}

export interface AutoDjControl {
  stop(serviceId: string): Promise<void>;
  sync(services: ServiceRow[], among?: ReadonlySet<string>): Promise<void>;
}

export interface LifecycleDeps {
  db: Database;
  live: LiveSnapshot;
  /** The streaming host whose services this worker runs (stable across restarts and address changes). */
  hostId: () => string;
  admin: () => IcecastAdmin | undefined;
  meter: UsageMeter;
  autodj?: AutoDjControl;
  /**
   * Relays are started and stopped by the host reconciler alone: a pass here syncing them from the services it read
   * at its start stopped a relay the reconciler had started meanwhile for a service just bought, and began it anew.
   * A decision here only cuts one (disconnect_source).
   */
  relays?: { stop(serviceId: string): Promise<void> };
  /** HLS renditions and sessions end with their service. */
  hls?: { sync(services: ServiceRow[]): Promise<void> };
  /**
   * The clients Icecast listed per live mount in the meter's poll of this pass (null: not listed, so not checked);
   * without it, each pass asks Icecast for the mounts and every live service's clients itself.
   */
  icecastClients?: () => ReadonlyMap<string, string[] | null> | undefined;
  /** The host's listener places in memory: told what Icecast reports on each pass. */
  places?: Pick<ListenerPlaces, 'observeIcecast'>;
  log: Logger;
  intervalMs: number;
  /** How long before its expiry a service announces service.expiring. */
  expiringLeadSeconds: number;
  /** How service.expiring tells the owner to extend (the operation and the price of one more hour). */
  extendHint?: ExtendHint;
}

const GB = new Decimal(1_000_000_000);
/** How long an expired service's usage is still updated (finalUsage), with a margin over its query's minute. */
const FINAL_USAGE_MS = 70_000;

/**
 * Runs the life-cycle rules (rules/lifecycle.json) over the services of one Icecast, about once a second, and carries
 * out what they decide. One instance per Icecast leads (a PostgreSQL advisory lock held on its own connection);
 * when it dies its connection closes and another instance takes over.
 */
export class LifecycleWorker {
  private readonly task: PeriodicTask;
  private leaderConnection?: Client;
  /** Per service of the last pass: the decisions and the facts they were made on (see decisionsFor). */
  private lastDecisions = new Map<string, RememberedDecisions>();
  /** The live services of the last pass, and until when an ended one's usage is still updated (finalUsage). */
  private livePreviously = new Set<string>();
  private finalUntil = 0;
  private hadServices = true;
  private readonly renewals = new TransferRenewals();

  constructor(private readonly deps: LifecycleDeps) {
    this.task = new PeriodicTask('life-cycle tick', () => this.tick(), { intervalMs: deps.intervalMs, log: deps.log });
  }

  start(): void {
    this.task.start();
  }

  async stop(): Promise<void> {
    await this.task.stop();
    const connection = this.leaderConnection;
    this.leaderConnection = undefined;
    connection?.release(true);
  }

  /** One pass; returns the decisions carried out (for tests and logs). */
  async tick(): Promise<{ service: string; decision: ServiceDecision }[]> {
    if (!(await this.lead())) return [];
    // A host that carried nothing on the last pass, and has no final usage to count, has nothing to measure.
    const fresh = this.hadServices || Date.now() < this.finalUntil ? await this.deps.meter.poll() : false;
    const measuredAt = new Date().toISOString();
    const services = await this.deps.db.query<ServiceRow & Record<string, unknown>>(
      `SELECT ${SERVICE_ROW_COLUMNS} FROM services WHERE host_id = $1 AND status IN ('active', 'suspended')`,
      [this.deps.hostId()],
    );
    this.hadServices = services.length > 0;
    const done: { service: string; decision: ServiceDecision }[] = [];
    const remembered = this.lastDecisions;
    this.lastDecisions = new Map();
    if (fresh) await this.reconcileListeners(services);
    const usages = services.map((service) => (fresh ? this.deps.meter.usage(service) : undefined));
    const settled = await this.renewals.settle(this.deps.db, services, usages, this.deps.meter);
    const facts = settled.map((service, i) => usageFactsOf(service, usages[i], measuredAt));
    const changed = services.flatMap((service, i) =>
      usages[i] && usageWorthWriting(service.usage, facts[i]) ? [{ id: service.id, usage: facts[i] }] : [],
    );
    await this.saveUsage(changed, fresh && services.length && usages.every(Boolean) ? measuredAt : undefined);
    for (const [i, service] of services.entries()) {
      const usage = usages[i];
      const usageFacts = facts[i];
      if (usage)
        await recordListenerThreshold(this.deps.db, service, listenerCapOf(service.limits), usage.listeners).catch(
          (err) => this.deps.log.warn({ err, service_id: service.id }, 'could not record listeners.threshold'),
        );
      for (const decision of await this.decisionsFor(service, usageFacts, remembered)) {
        if (await this.apply(service, decision)) done.push({ service: service.id, decision });
        if (decision.kind === 'transition') break;
      }
    }
    if (fresh && this.endedLately(services)) await this.finalUsage(measuredAt);
    if (this.expiringAmong(services))
      await recordExpiringServices(
        this.deps.db,
        this.deps.hostId(),
        this.deps.expiringLeadSeconds,
        this.deps.extendHint,
      ).catch((err) => this.deps.log.warn({ err }, 'could not record service.expiring'));
    const stillActive = done.length
      ? await this.deps.db.query<ServiceRow & Record<string, unknown>>(
          `SELECT ${SERVICE_ROW_COLUMNS} FROM services WHERE host_id = $1 AND status = 'active'`,
          [this.deps.hostId()],
        )
      : services.filter((s) => s.status === 'active');
    // Only the services this pass read: one bought since may already have the AutoDJ the reconciler started for it.
    const read = new Set([...services, ...stillActive].map((s) => s.id));
    await this.deps.autodj?.sync(stillActive, read);
    await this.deps.hls?.sync(stillActive);
    return done;
  }

  /**
   * What the life-cycle rules decide for a service. Which rules fire is a pure function of the snapshot's rules and
   * the facts their conditions read, so a pass where none fired stands while those facts are the same (the usage
   * figures no condition names aside, such as listener hours that grow every pass while listeners are held, or a live
   * source's bitrate, which only a reason quotes): with many live services and nothing changing, the rules do not run
   * again for each of them every pass. Decisions are evaluated afresh, their reasons quoting the latest figures. Time
   * enters the facts as `expired`, so paid time still ends on the pass it should.
   */
  private async decisionsFor(
    service: ServiceRow,
    usage: Record<string, unknown>,
    remembered: Map<string, RememberedDecisions>,
  ): Promise<ServiceDecision[]> {
    const snapshot = this.deps.live.current;
    const stage = snapshot.rules.lifecycle;
    const facts = { service: serviceFacts(service), usage };
    const key = JSON.stringify({ ...facts, usage: usageDecidingRules(stage, usage) });
    const last = remembered.get(service.id);
    const decisions =
      last && last.stage === stage && last.key === key && last.decisions.length === 0
        ? last.decisions
        : (
            await stage.evaluate(
              {
                ...facts,
                product: snapshot.catalog.byId.get(service.product_id)?.product ?? { id: service.product_id },
                settings: snapshot.catalog.settings,
              },
              6,
            )
          ).decisions;
    this.lastDecisions.set(service.id, { stage, key, decisions });
    return decisions;
  }

  /**
   * Whether a service may have expired within the last minute: one of the last pass's services is no longer live, or
   * this worker began leading less than a minute ago. Otherwise no service of the host has a final usage to update.
   */
  private endedLately(services: ServiceRow[]): boolean {
    const live = new Set(services.map((s) => s.id));
    const now = Date.now();
    if ([...this.livePreviously].some((id) => !live.has(id))) this.finalUntil = now + FINAL_USAGE_MS;
    this.livePreviously = live;
    return now < this.finalUntil;
  }

  /** Whether a service of the pass is within the lead of its expiry (the others have no service.expiring due). */
  private expiringAmong(services: ServiceRow[]): boolean {
    const now = Date.now();
    const lead = this.deps.expiringLeadSeconds * 1000;
    return services.some(
      (s) => s.expires_at && s.expires_at.getTime() > now - 1000 && s.expires_at.getTime() <= now + lead + 1000,
    );
  }

  /**
   * A service that just expired is no longer run by the rules, but its last listeners' access-log lines and its
   * source's end arrive after the cut: its usage keeps being updated for a minute.
   */
  private async finalUsage(measuredAt: string): Promise<void> {
    const ended = await this.deps.db.query<ServiceRow & Record<string, unknown>>(
      `SELECT ${SERVICE_ROW_COLUMNS} FROM services
       WHERE host_id = $1 AND status = 'expired' AND expires_at > now() - interval '1 minute'`,
      [this.deps.hostId()],
    );
    const saved = [];
    for (const service of ended) {
      const usage = this.deps.meter.usage(service);
      if (usage) saved.push({ id: service.id, usage: usageFactsOf(service, usage, measuredAt) });
    }
    await this.saveUsage(saved);
  }

  /**
   * The usages worth writing (usageWorthWriting), in one statement for the whole pass (a round trip per service cost
   * more than the rest). A pass that measured every live service of the host also records when (`passMeasuredAt`,
   * table usage_passes): an idle service's row is then not rewritten every second, nor a streaming one's between its
   * refreshes (each rewrite is a new row version, WAL and a trigger, for every live service, every pass), and its
   * usage document shows the later of its row's measured_at and the pass's.
   */
  private async saveUsage(
    usages: Array<{ id: string; usage: Record<string, unknown> }>,
    passMeasuredAt?: string,
  ): Promise<void> {
    const update = `UPDATE services s SET usage = u.usage, updated_at = now()
       FROM jsonb_to_recordset($1::jsonb) AS u(id text, usage jsonb) WHERE s.id = u.id`;
    if (passMeasuredAt)
      await this.deps.db.query(
        `WITH saved AS (${update}) INSERT INTO usage_passes (host_id, measured_at) VALUES ($2, $3)
         ON CONFLICT (host_id) DO UPDATE SET measured_at = excluded.measured_at`,
        [JSON.stringify(usages), this.deps.hostId(), passMeasuredAt],
      );
    else if (usages.length) await this.deps.db.query(update, [JSON.stringify(usages)]);
  }

  /** Listener rows whose listener_remove callback was lost (service down, Icecast restarted) are dropped. */
  private async reconcileListeners(services: ServiceRow[]): Promise<void> {
    const clientsOf = await this.icecastClients();
    if (!clientsOf) return;
    const checked: string[] = [];
    const connected: string[] = [];
    const seen = new Map<string, string[]>();
    for (const service of services) {
      const clients = await clientsOf(service.mount);
      if (clients === undefined) continue;
      checked.push(service.id);
      seen.set(service.id, clients);
      for (const client of clients) connected.push(`${service.id} ${client}`);
    }
    this.deps.places?.observeIcecast(seen);
    if (!checked.length) return;
    // A listener admitted a moment ago may not be in listclients yet (one HAProxy admitted may still wait in its
    // queue): only rows older than that are stale. One statement for every service of the pass.
    await this.deps.db.query(
      `DELETE FROM listeners WHERE service_id = ANY($1::text[])
       AND connected_at < now() - CASE WHEN client_id LIKE $3 THEN $4::int ELSE $5::int END * interval '1 millisecond'
       AND NOT (service_id || ' ' || client_id = ANY($2::text[])) AND client_id NOT LIKE 'hls:%'`,
      [checked, connected, `${PROXY_USER}%`, listclientsLagMs(PROXY_USER), listclientsLagMs('')],
    );
  }

  /**
   * Each live service's clients as Icecast lists them now (none when its mount is not live; undefined: not known or
   * not checked this pass). From the meter's poll when it listed them: with many listeners and nothing changing, a
   * pass asks Icecast nothing more.
   */
  private async icecastClients(): Promise<((mount: string) => Promise<string[] | undefined>) | undefined> {
    const polled = this.deps.icecastClients?.();
    if (polled) return async (mount) => (polled.has(mount) ? (polled.get(mount) ?? undefined) : []);
    const admin = this.deps.admin();
    if (!admin) return undefined;
    const mounts = await admin.listMounts().catch(() => undefined);
    if (!mounts) return undefined;
    const live = new Set(mounts.map((m) => m.mount));
    return async (mount) =>
      live.has(mount) ? (await admin.listClients(mount).catch(() => undefined))?.map(placeKey) : [];
  }

  private async lead(): Promise<boolean> {
    if (this.leaderConnection) return true;
    const connection = await this.deps.db.dedicated();
    const locked = await connection
      .query("SELECT pg_try_advisory_lock(hashtextextended('lifecycle ' || $1, 0)) AS locked", [this.deps.hostId()])
      .then(({ rows: [row] }) => row.locked as boolean)
      .catch((err: Error) => {
        // No answer (the connections are bounded in time) or none at all: the connection is not used again.
        connection.release(err);
        throw err;
      });
    if (!locked) {
      connection.release();
      return false;
    }
    connection.on('error', () => {
      if (this.leaderConnection !== connection) return;
      this.leaderConnection = undefined;
      connection.release(true);
    });
    this.leaderConnection = connection;
    // Services may have expired while another instance led.
    this.finalUntil = Date.now() + FINAL_USAGE_MS;
    return true;
  }

  private async apply(service: ServiceRow, decision: ServiceDecision): Promise<boolean> {
    if (decision.kind === 'transition') {
      const changed = await this.deps.db.transaction(async (client) => {
        // Decided on the row as this pass read it: an extension paid meanwhile moved expires_at, and the decision is void.
        const row = await transitionService(client, {
          serviceId: service.id,
          kind: 'lifecycle',
          from: service.status,
          to: decision.to as ServiceStatus,
          reason: decision.reason,
          unchanged: { expires_at: service.expires_at },
        });
        if (row) await recordStatusChange(client, service.id, service.status, decision.to, decision.reason);
        return row !== undefined;
      });
      if (!changed) return false;
      this.deps.log.info(
        { service_id: service.id, from: service.status, to: decision.to, reason: decision.reason },
        'service status changed',
      );
      await this.act(service, decision.actions);
      return true;
    }
    const acted = await this.act(service, decision.actions);
    if (acted) {
      await recordServiceEvent(this.deps.db, {
        serviceId: service.id,
        kind: 'enforce',
        code: decision.code,
        reason: decision.reason,
      });
      await showServiceReason(this.deps.db, service.id, decision.reason);
      this.deps.log.info({ service_id: service.id, code: decision.code, reason: decision.reason }, 'enforced');
    }
    return acted;
  }

  /** Carries out actions; true when at least one changed something. */
  private async act(service: ServiceRow, actions: ServiceAction[]): Promise<boolean> {
    const admin = this.deps.admin();
    let changed = false;
    for (const action of actions) {
      try {
        if (action === 'stop_autodj' && this.deps.autodj) await this.deps.autodj.stop(service.id);
        if (action === 'disconnect_source') await this.deps.relays?.stop(service.id);
        if (action === 'disconnect_source' && admin) changed = (await admin.killSource(service.mount)) || changed;
        if (action === 'disconnect_listeners') {
          if (admin)
            for (const client of await admin.listClients(service.mount).catch(() => []))
              changed = (await admin.killClient(service.mount, client.id)) || changed;
          await this.deps.db.query('DELETE FROM listeners WHERE service_id = $1', [service.id]);
        }
      } catch (err) {
        this.deps.log.warn({ service_id: service.id, action, err }, 'action failed; retried on the next pass');
      }
    }
    return changed;
  }
}

interface RememberedDecisions {
  stage: Stage;
  key: string;
  decisions: ServiceDecision[];
}

function serviceFacts(service: ServiceRow): Record<string, unknown> {
  const expiresAt = service.expires_at;
  return {
    id: service.id,
    status: service.status,
    product_id: service.product_id,
    expires_at: expiresAt?.toISOString() ?? null,
    expired: expiresAt ? expiresAt.getTime() <= Date.now() : false,
    bitrate_kbps: service.limits.bitrate_kbps ?? null,
    autodj: hasAutoDj(service),
  };
}

/** Usage as the rules read it: amounts as decimal strings. Without a fresh reading, the last persisted one. */
function usageFactsOf(service: ServiceRow, usage: MountUsage | undefined, measuredAt: string): Record<string, unknown> {
  const previous = service.usage ?? {};
  if (!usage)
    return { ...previous, transfer_included_gb: String(service.limits.transfer_gb ?? 0), source_over_bitrate: false };
  return {
    listeners: usage.listeners,
    peak_listeners: usage.peakListeners,
    listener_hours: new Decimal(usage.listenerSeconds).dividedBy(3600).toDecimalPlaces(6).toFixed(),
    bytes_sent: usage.bytesSent,
    bytes_read: usage.bytesRead,
    transfer_used_gb: Decimal.max(0, new Decimal(usage.bytesSent).minus(service.transfer_offset_bytes ?? 0))
      .dividedBy(GB)
      .toFixed(),
    transfer_included_gb: String(service.limits.transfer_gb ?? 0),
    source_connected: usage.sourceConnected,
    source_since: usage.sourceSince,
    source_kbps: usage.sourceKbps,
    source_over_bitrate: usage.sourceOverBitrate,
    ...(usage.sourceBudget && {
      source_budget: {
        window_seconds: usage.sourceBudget.windowSeconds,
        tolerance: usage.sourceBudget.tolerance,
        capacity_bytes: usage.sourceBudget.capacityBytes,
        remaining_bytes: usage.sourceBudget.state.level,
        refused_until: usage.sourceBudget.refusedUntil,
        state: usage.sourceBudget.state,
      },
    }),
    measured_at: measuredAt,
  };
}
