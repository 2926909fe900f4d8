import { randomBytes } from 'node:crypto';
import { randomId } from '../ids/index.js';
import type { Database } from '../store/index.js';
import type { EventType } from './event-types.js';

/** An endpoint as its owner sees it: never its secret (shown once, at creation and rotation). */
export interface WebhookEndpoint {
  id: string;
  url: string;
  service_id: string | null;
  /** null: every event type. */
  events: EventType[] | null;
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  consecutive_failures: number;
  /** Until when the secret replaced by the last rotation still signs deliveries. */
  previous_secret_valid_until: string | null;
  created_at: string;
}

export interface EndpointSecrets {
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
}

const PUBLIC_COLUMNS = `id, url, service_id, events, CASE WHEN disabled_at IS NULL THEN 'enabled' ELSE 'disabled' END AS status,
  disabled_reason, consecutive_failures,
  CASE WHEN previous_secret_until > now() THEN to_char(previous_secret_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') END AS previous_secret_valid_until,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created_at`;

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** Webhook endpoints of API keys. Secrets are stored as they are (an HMAC key is needed to sign) and never returned again. */
export class WebhookEndpoints {
  constructor(private readonly db: Database, private readonly graceSeconds: number) {}

  async create(apiKeyId: string, fields: { url: string; serviceId?: string; events?: EventType[] }): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const secret = newSecret();
    const [endpoint] = await this.db.query<WebhookEndpoint & Record<string, unknown>>(
      `INSERT INTO webhook_endpoints (id, api_key_id, service_id, url, events, secret) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${PUBLIC_COLUMNS}`,
      [randomId('whk_'), apiKeyId, fields.serviceId ?? null, fields.url, fields.events ?? null, secret]);
    return { endpoint, secret };
  }

  async list(apiKeyId: string): Promise<WebhookEndpoint[]> {
    return this.db.query<WebhookEndpoint & Record<string, unknown>>(
      `SELECT ${PUBLIC_COLUMNS} FROM webhook_endpoints WHERE api_key_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`, [apiKeyId]);
  }

  /** Deletes the endpoint; deliveries not yet made are dropped. False when the key has no such endpoint. */
  async remove(apiKeyId: string, id: string): Promise<boolean> {
    return this.db.transaction(async (client) => {
      const { rows } = await client.query('UPDATE webhook_endpoints SET deleted_at = now() WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL RETURNING id', [id, apiKeyId]);
      if (!rows.length) return false;
      await client.query("UPDATE webhook_deliveries SET state = 'failed', last_error = 'endpoint deleted' WHERE endpoint_id = $1 AND state = 'pending'", [id]);
      return true;
    });
  }

  /** A new secret; the current one keeps signing (a second v1) for the grace period. */
  async rotate(apiKeyId: string, id: string): Promise<{ endpoint: WebhookEndpoint; secret: string } | undefined> {
    const secret = newSecret();
    const [endpoint] = await this.db.query<WebhookEndpoint & Record<string, unknown>>(
      `UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_until = now() + make_interval(secs => $4), secret = $3
       WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL RETURNING ${PUBLIC_COLUMNS}`, [id, apiKeyId, secret, this.graceSeconds]);
    return endpoint && { endpoint, secret };
  }
}

/** The secrets that sign a delivery now: the current one, and the previous one during its grace. */
export function signingSecrets(endpoint: EndpointSecrets, now = new Date()): string[] {
  return endpoint.previous_secret && endpoint.previous_secret_until && endpoint.previous_secret_until > now
    ? [endpoint.secret, endpoint.previous_secret]
    : [endpoint.secret];
}
