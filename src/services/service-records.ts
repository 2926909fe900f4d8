import { randomBytes } from 'node:crypto';
import { randomId } from '../ids/index.js';
import { mp3EncoderArgs } from '../provisioning/index.js';
import { Decimal } from '../rules/index.js';
import { listenAddresses } from './listen-addresses.js';
import { ListenerSessions } from './listener-sessions.js';
import { paidUntil } from './paid-until.js';
import { NEW_SERVICE_STATUS, transitionService, type ServiceStatus } from './service-transitions.js';
import type { Client, Database } from '../store/index.js';

export interface ServiceRow {
  id: string;
  order_id: string;
  api_key_id: string;
  product_id: string;
  status: ServiceStatus;
  mount: string;
  source_user: string;
  source_password: string;
  limits: Record<string, unknown>;
  expires_at: Date | null;
  icecast_url: string | null;
  /** The streaming host (one Icecast) the service belongs to, by its stable id. */
  host_id: string | null;
  /** That host's current public address, joined in when the row is read. */
  host_url?: string | null;
  status_reason: string | null;
  usage: Record<string, unknown>;
  playlist: string[] | null;
  shuffle: boolean;
  transfer_offset_bytes: string;
  /** When the transfer allowance was last renewed (an upgrade); null if never. */
  transfer_renewed_at?: Date | null;
  /** When its owner stopped it (POST /services/{id}/stop); it is then expired for good and never extended again. */
  stopped_at?: Date | null;
}

/** An order's new service as one INSERT statement (see ServiceRecords.newServiceInsert). */
export interface ServiceInsert {
  service: Pick<ServiceRow, 'id' | 'product_id' | 'status' | 'expires_at' | 'limits'>;
  sql: string;
  params: unknown[];
}

/** The service record of spec 2.7 (no other properties). */
export interface ServiceDocument {
  service_id: string;
  status: ServiceRow['status'];
  stream_url: string;
  broadcast_url?: string;
  expires_at?: string;
  limits: Record<string, unknown>;
  endpoints?: Record<string, string>;
}

export interface StreamingEndpoint {
  /** Where listeners and encoders reach Icecast, e.g. http://127.0.0.1:8000 */
  publicUrl(): string;
  /** This Icecast's stable identity; its services keep it when its address changes. */
  hostId(): string;
}

/**
 * The columns of a ServiceRow, for the workers that read every live service of a host over and over: nothing more
 * (not the host's address, nor the row's own timestamps).
 */
export const SERVICE_ROW_COLUMNS = `id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits,
  expires_at, icecast_url, host_id, status_reason, usage, playlist, shuffle, transfer_offset_bytes, transfer_renewed_at,
  stopped_at`;

/** A service row with its host's current public address (the address its URLs are derived from). */
const WITH_HOST_URL = 's.*, h.public_url AS host_url FROM services s LEFT JOIN streaming_hosts h ON h.id = s.host_id';
const RETURNING_WITH_HOST_URL =
  'RETURNING *, (SELECT public_url FROM streaming_hosts h WHERE h.id = services.host_id) AS host_url';

/** How many listeners a service was sold, whichever way its product names it (listener_places() in SQL, migration 030). */
export function listenerCapOf(limits: Record<string, unknown>): number {
  return Number(limits.max_listeners ?? limits.listeners ?? limits.max_concurrent_listeners ?? 0);
}

/** A paid change to a service its owner stopped meanwhile: never applied; the payment is refunded in full. */
export class ServiceStopped extends Error {
  constructor(readonly serviceId: string) {
    super(`service ${serviceId} was stopped by its owner`);
  }
}

/** What an order turns into: a mount with its own source credentials, limits and expiry. */
export class ServiceRecords {
  constructor(
    private readonly db: Database,
    private readonly streaming: StreamingEndpoint,
    private readonly apiBaseUrl: () => string,
    /** Addresses other rooms serve for a service (the HLS playlist), added to its endpoints. */
    private readonly moreEndpoints: (service: ServiceRow) => Record<string, string> = () => ({}),
  ) {}

  /** The service an order already has (read in the caller's transaction). */
  async ofOrder(client: Client, orderId: string): Promise<ServiceRow> {
    return (await client.query(`SELECT ${WITH_HOST_URL} WHERE s.order_id = $1`, [orderId])).rows[0] as ServiceRow;
  }

  /**
   * The INSERT of an order's new active service (nothing if the order has one), its parameters numbered from `first`,
   * returning the row with its host's address; and the service as it will be, for the event announcing it. With
   * `onlyIf`, the name of a CTE of the statement it runs in, the service is inserted only when that CTE returns a row.
   */
  newServiceInsert(
    order: { id: string; api_key_id: string; product_id: string; host_id?: string | null },
    limits: Record<string, unknown>,
    expiresAt: Date | null,
    first = 1,
    onlyIf?: string,
  ): ServiceInsert {
    const id = randomId('svc_');
    const mount = `/live-${randomId('', 9).replace(/[-_]/g, 'x')}`;
    const $ = (i: number) => `$${first + i - 1}`;
    const row = `${$(1)}::text, ${$(2)}::text, ${$(3)}::text, ${$(4)}::text, '${NEW_SERVICE_STATUS}', ${$(5)}::text, 'source',
               ${$(6)}::text, ${$(7)}::jsonb, ${$(8)}::timestamptz,
               COALESCE((SELECT public_url FROM streaming_hosts WHERE id = ${$(12)}::text), ${$(9)}::text),
               ${$(10)}::jsonb, ${$(11)}::boolean, ${$(12)}::text`;
    return {
      service: { id, product_id: order.product_id, status: NEW_SERVICE_STATUS, expires_at: expiresAt, limits },
      sql: `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password,
                                  limits, expires_at, icecast_url, playlist, shuffle, host_id)
       ${onlyIf ? `SELECT ${row} WHERE EXISTS (SELECT 1 FROM ${onlyIf})` : `VALUES (${row})`}
       ON CONFLICT (order_id) DO NOTHING ${RETURNING_WITH_HOST_URL}`,
      params: [
        id,
        order.id,
        order.api_key_id,
        order.product_id,
        mount,
        randomBytes(18).toString('base64url'),
        limits,
        expiresAt,
        this.streaming.publicUrl(),
        JSON.stringify(playlistOf(limits)),
        limits.shuffle === true,
        order.host_id ?? this.streaming.hostId(),
      ],
    };
  }

  /** The service if it belongs to this API key; another key's service is indistinguishable from none. */
  async owned(apiKeyId: string, serviceId: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>(
      `SELECT ${WITH_HOST_URL} WHERE s.id = $1 AND s.api_key_id = $2`,
      [serviceId, apiKeyId],
    );
    return row;
  }

  /** The service if its order was paid by this wallet (lower-case 0x address); any other is indistinguishable from none. */
  async paidBy(payer: string, serviceId: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>(
      `SELECT ${WITH_HOST_URL} JOIN orders o ON o.id = s.order_id WHERE s.id = $1 AND o.payer = $2`,
      [serviceId, payer],
    );
    return row;
  }

  /** The newest services of one API key, or paid by one wallet (lower-case 0x address). */
  async list(owner: { apiKeyId: string } | { payer: string }, limit = 100): Promise<ServiceRow[]> {
    return 'payer' in owner
      ? this.db.query<ServiceRow & Record<string, unknown>>(
          `SELECT ${WITH_HOST_URL} JOIN orders o ON o.id = s.order_id WHERE o.payer = $1 ORDER BY s.created_at DESC, s.id LIMIT $2`,
          [owner.payer, limit],
        )
      : this.db.query<ServiceRow & Record<string, unknown>>(
          `SELECT ${WITH_HOST_URL} WHERE s.api_key_id = $1 ORDER BY s.created_at DESC, s.id LIMIT $2`,
          [owner.apiKeyId, limit],
        );
  }

  async setPlaylist(serviceId: string, playlist: string[], shuffle: boolean): Promise<ServiceRow> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>(
      `UPDATE services SET playlist = $2, shuffle = $3, updated_at = now() WHERE id = $1 ${RETURNING_WITH_HOST_URL}`,
      [serviceId, JSON.stringify(playlist), shuffle],
    );
    return row;
  }

  /** What the service used so far, as the life-cycle worker last measured it, plus time and storage. */
  async usage(
    service: ServiceRow,
    media?: { usedBytes(id: string): Promise<number> },
  ): Promise<Record<string, unknown>> {
    const measured = service.usage ?? {};
    const events = await this.db.query(
      'SELECT at, kind, from_status, to_status, code, reason FROM service_events WHERE service_id = $1 ORDER BY id DESC LIMIT 20',
      [service.id],
    );
    const [{ connected, pass_measured_at: passMeasuredAt }] = await this.db.query<{
      connected: number;
      pass_measured_at: Date | null;
    }>(
      `SELECT (SELECT count(*)::int FROM listeners WHERE service_id = $1) AS connected,
              (SELECT measured_at FROM usage_passes WHERE host_id = $2) AS pass_measured_at`,
      [service.id, service.host_id],
    );
    const remaining = service.expires_at
      ? Math.max(0, Math.floor((service.expires_at.getTime() - Date.now()) / 1000))
      : null;
    const storageMb = service.limits.storage_mb;
    const budget = measured.source_budget as Record<string, unknown> | undefined;
    return {
      service_id: service.id,
      status: service.status,
      status_reason: service.status_reason,
      // Admitted listeners leave the table at once (listener_remove callback, else the worker's reconciliation with
      // listclients); the measured count lags by a pass and stops with the service.
      listeners: {
        current: Math.min(Number(measured.listeners ?? connected), connected),
        peak: measured.peak_listeners ?? connected,
        admitted_now: connected,
      },
      listener_hours: measured.listener_hours ?? '0',
      listener_sessions: await new ListenerSessions(this.db).aggregates(service.id),
      bytes: { sent_to_listeners: measured.bytes_sent ?? 0, read_from_source: measured.bytes_read ?? 0 },
      transfer: {
        used_gb: measured.transfer_used_gb ?? '0',
        included_gb: String(service.limits.transfer_gb ?? 0),
        // The catalog's estimated_included_limit applies to transfer bought; without any, the listener cap and the
        // bitrate bought are what bound it (lifecycle rule suspend-when-bought-transfer-is-used-up).
        ...(Number(service.limits.transfer_gb ?? 0) > 0
          ? {
              policy: 'estimated_included_limit',
              note: 'The service is suspended when listeners use more than the included transfer; an upgrade resumes it.',
            }
          : {
              policy: 'not_limited',
              note: 'No transfer was bought (transfer_gb 0): usage is reported, not limited; max_listeners and the bitrate bought bound it.',
            }),
      },
      source: {
        connected: measured.source_connected ?? false,
        since: measured.source_since ?? null,
        measured_kbps: measured.source_kbps ?? null,
        bought_kbps: service.limits.bitrate_kbps ?? null,
        ...(budget && {
          bitrate_budget: {
            window_seconds: budget.window_seconds,
            tolerance: budget.tolerance,
            capacity_bytes: budget.capacity_bytes,
            remaining_bytes: budget.remaining_bytes,
            refused_until: budget.refused_until,
          },
        }),
      },
      time: { expires_at: service.expires_at?.toISOString() ?? null, remaining_seconds: remaining },
      ...(storageMb !== undefined &&
        media && {
          storage: {
            used_mb: Math.round(((await media.usedBytes(service.id)) / 1024 / 1024) * 1000) / 1000,
            bought_mb: storageMb,
          },
        }),
      measured_at: measuredAt(service, passMeasuredAt),
      events,
    };
  }

  async byId(serviceId: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>(`SELECT ${WITH_HOST_URL} WHERE s.id = $1`, [
      serviceId,
    ]);
    return row;
  }

  /** Takes the service's row lock, as a claim for its upgrade does first (see advance.ts settleAndProvision). */
  async lock(client: Client, serviceId: string): Promise<void> {
    await client.query('SELECT 1 FROM services WHERE id = $1 FOR UPDATE', [serviceId]);
  }

  /**
   * A paid upgrade: the service becomes the new product with the new limits (its paid time unchanged), its bought
   * transfer counts again from now (from the bytes counted now; the life-cycle worker adds those of listeners that
   * ended before and are counted late: TransferRenewals), and a suspension ends. Icecast is not touched: the source
   * and listeners stay.
   */
  async applyUpgrade(
    client: Client,
    serviceId: string,
    productId: string,
    configuration: Record<string, unknown>,
  ): Promise<ServiceRow> {
    const {
      rows: [before],
    } = await client.query('SELECT * FROM services WHERE id = $1 FOR UPDATE', [serviceId]);
    // Stopped while the upgrade was being paid: it is not revived; the upgrade is refunded in full (src/refunds).
    if ((before as { stopped_at?: Date | null }).stopped_at) throw new ServiceStopped(serviceId);
    const limits = { ...configuration, duration_hours: (before as ServiceRow).limits.duration_hours };
    const reason = `Upgraded from ${(before as ServiceRow).product_id} to ${productId}.`;
    const after = await transitionService<ServiceRow>(client, {
      serviceId,
      kind: 'upgrade',
      from: (before as ServiceRow).status,
      reason,
      set: { product_id: productId, limits },
      compute: {
        transfer_offset_bytes: "coalesce((usage->>'bytes_sent')::bigint, 0)",
        // In milliseconds, as the life-cycle worker reads it back and names it when it raises the offset.
        transfer_renewed_at: "date_trunc('milliseconds', clock_timestamp())",
      },
    });
    return after!;
  }

  /**
   * A paid extension: the expiry moves by the hours bought, from the old expiry while it is still ahead (never from
   * now: extending early loses nothing), and from now once it has passed (a service that comes back runs for every
   * hour bought, never for time already gone); the hours paid over the service's life grow by as much. An expired
   * service comes back as it was (same mount, same credentials); a suspended one stays suspended (an upgrade resumes
   * it). Icecast reads the new expiry at its next callback.
   */
  async applyExtension(client: Client, serviceId: string, orderId: string, hours: number): Promise<ServiceRow> {
    // The database's clock, as the life-cycle worker reads it, rounded up to the millisecond the expiry is kept in.
    const {
      rows: [found],
    } = await client.query(
      `SELECT *, date_trunc('milliseconds', clock_timestamp() + interval '999 microseconds') AS extension_applied_at
       FROM services WHERE id = $1 FOR UPDATE`,
      [serviceId],
    );
    const { extension_applied_at: appliedAt, ...row } = found as ServiceRow & { extension_applied_at: Date };
    const before = row as ServiceRow;
    // Stopped (and refunded) after this extension was claimed: never revived; the extension is refunded in full.
    if (before.stopped_at) throw new ServiceStopped(serviceId);
    const added = new Decimal(String(hours));
    const from = Math.max(before.expires_at!.getTime(), appliedAt.getTime());
    const expiresAt = paidUntil(from, hours);
    const limits = {
      ...before.limits,
      duration_hours: new Decimal(String(before.limits.duration_hours ?? 0)).plus(added).toNumber(),
    };
    const lapsed = from > before.expires_at!.getTime() ? `, counted from ${appliedAt.toISOString()}` : '';
    const back = before.status === 'expired' ? ', back from expired' : '';
    const reason = `Extended by ${added.toFixed()} hours (order ${orderId}) until ${expiresAt.toISOString()}${lapsed}${back}.`;
    const after = await transitionService<ServiceRow>(client, {
      serviceId,
      kind: 'extension',
      from: before.status,
      reason,
      set: { expires_at: expiresAt, limits },
    });
    return after!;
  }

  async forOrder(orderId: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>(
      `SELECT ${WITH_HOST_URL} WHERE s.order_id = $1`,
      [orderId],
    );
    return row;
  }

  document(service: ServiceRow): ServiceDocument {
    const base = new URL(service.host_url ?? service.icecast_url ?? this.streaming.publicUrl());
    return {
      service_id: service.id,
      status: service.status,
      ...streamAddresses(base, service),
      ...(service.expires_at && { expires_at: service.expires_at.toISOString() }),
      limits: service.limits,
      endpoints: {
        listen: new URL(service.mount, base).href,
        source_host: base.hostname,
        source_port: base.port || (base.protocol === 'https:' ? '443' : '80'),
        source_mount: service.mount,
        ...encoderHints(Number(service.limits.bitrate_kbps ?? 0)),
        service: `${this.apiBaseUrl()}/services/${service.id}`,
        ...listenAddresses(this.apiBaseUrl(), service.id),
        podcast_feed: `${this.apiBaseUrl()}/services/${service.id}/podcast.xml`,
        ...this.moreEndpoints(service),
      },
    };
  }
}

/** Where listeners hear a service and where its encoder sends, on the host reached at `base`. */
export function streamAddresses(
  base: URL,
  service: Pick<ServiceRow, 'mount' | 'source_user' | 'source_password'>,
): { stream_url: string; broadcast_url: string } {
  const credentials = `${encodeURIComponent(service.source_user)}:${encodeURIComponent(service.source_password)}`;
  return {
    stream_url: new URL(service.mount, base).href,
    broadcast_url: `icecast://${credentials}@${base.host}${service.mount}`,
  };
}

/** The order's playlist parameter: file names separated by newlines or commas, in play order. */
function playlistOf(limits: Record<string, unknown>): string[] {
  return typeof limits.playlist === 'string'
    ? limits.playlist
        .split(/[\n,]/)
        .map((n) => n.trim())
        .filter(Boolean)
    : [];
}

/** How to feed the mount with ffmpeg (16 and 24 kbps need a lower sample rate: see mp3EncoderArgs). */
function encoderHints(kbps: number): Record<string, string> {
  if (!(kbps > 0)) return {};
  return {
    encoder_example: `ffmpeg -re -i INPUT ${mp3EncoderArgs(kbps).join(' ')} -content_type audio/mpeg -f mp3 BROADCAST_URL`,
    encoder_note:
      `Send at most ${kbps} kbps on average: a source that sends more is cut and refused for a while (GET /services/{service_id}/usage shows source.bitrate_budget). ` +
      'MP3 below 32 kbps needs a sample rate of 24 kHz or lower (-ar 22050); at 44.1 or 48 kHz the encoder sends 32 kbps.',
  };
}

/**
 * When the service's usage was last measured. The life-cycle pass measures every live service of its host but rewrites
 * a service's row only when a reader would see the change (usageWorthWriting: a held listener's or a live source's
 * growing bytes at most every 30 s), and records once per pass when it measured them all (usage_passes): a live service
 * that was measured at least once is as fresh as its host's last such pass.
 */
function measuredAt(service: ServiceRow, passMeasuredAt: Date | null): string | null {
  const own = typeof service.usage?.measured_at === 'string' ? service.usage.measured_at : null;
  const live = service.status === 'active' || service.status === 'suspended';
  if (!own || !live || !passMeasuredAt || passMeasuredAt.getTime() <= Date.parse(own)) return own;
  return passMeasuredAt.toISOString();
}
