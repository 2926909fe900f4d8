import { randomBytes } from 'node:crypto';
import { randomId } from '../ids/index.js';
import type { Client, Database } from '../store/index.js';

export interface ServiceRow {
  id: string;
  order_id: string;
  api_key_id: string;
  product_id: string;
  status: 'pending' | 'provisioning' | 'active' | 'failed' | 'suspended' | 'expired';
  mount: string;
  source_user: string;
  source_password: string;
  limits: Record<string, unknown>;
  expires_at: Date | null;
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
}

/** What an order turns into: a mount with its own source credentials, limits and expiry. */
export class ServiceRecords {
  constructor(private readonly db: Database, private readonly streaming: StreamingEndpoint, private readonly apiBaseUrl: () => string) {}

  /** Creates the service of a paid order inside the caller's transaction; a second call for the same order returns the first service. */
  async createForOrder(client: Client, order: { id: string; api_key_id: string; product_id: string }, limits: Record<string, unknown>, expiresAt: Date | null): Promise<ServiceRow> {
    const id = randomId('svc_');
    const mount = `/live-${randomId('', 9).replace(/[-_]/g, 'x')}`;
    const inserted = await client.query(
      `INSERT INTO services (id, order_id, api_key_id, product_id, status, mount, source_user, source_password, limits, expires_at)
       VALUES ($1, $2, $3, $4, 'active', $5, 'source', $6, $7, $8) ON CONFLICT (order_id) DO NOTHING RETURNING *`,
      [id, order.id, order.api_key_id, order.product_id, mount, randomBytes(18).toString('base64url'), limits, expiresAt]);
    if (inserted.rows[0]) return inserted.rows[0] as ServiceRow;
    return (await client.query('SELECT * FROM services WHERE order_id = $1', [order.id])).rows[0] as ServiceRow;
  }

  /** The service if it belongs to this API key; another key's service is indistinguishable from none. */
  async owned(apiKeyId: string, serviceId: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>('SELECT * FROM services WHERE id = $1 AND api_key_id = $2', [serviceId, apiKeyId]);
    return row;
  }

  async forOrder(orderId: string): Promise<ServiceRow | undefined> {
    const [row] = await this.db.query<ServiceRow & Record<string, unknown>>('SELECT * FROM services WHERE order_id = $1', [orderId]);
    return row;
  }

  document(service: ServiceRow): ServiceDocument {
    const base = new URL(this.streaming.publicUrl());
    const credentials = `${encodeURIComponent(service.source_user)}:${encodeURIComponent(service.source_password)}`;
    return {
      service_id: service.id,
      status: service.status,
      stream_url: new URL(service.mount, base).href,
      broadcast_url: `icecast://${credentials}@${base.host}${service.mount}`,
      ...(service.expires_at && { expires_at: service.expires_at.toISOString() }),
      limits: service.limits,
      endpoints: {
        listen: new URL(service.mount, base).href,
        source_host: base.hostname,
        source_port: base.port || (base.protocol === 'https:' ? '443' : '80'),
        source_mount: service.mount,
        service: `${this.apiBaseUrl()}/services/${service.id}`,
      },
    };
  }
}
