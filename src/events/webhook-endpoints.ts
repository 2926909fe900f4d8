import { randomBytes } from 'node:crypto';
import { ApiError } from '../errors/index.js';
import { randomId } from '../ids/index.js';
import type { Database } from '../store/index.js';
import type { EventType } from './event-types.js';
import { isSealed, type SecretBox } from './secret-box.js';

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
  endpoint_id: string;
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

/**
 * Webhook endpoints of API keys. Secrets are stored sealed (src/events/secret-box.ts: signing needs them, so they
 * cannot be hashed) and never returned again. Without a secrets key (production without WEBHOOK_SECRETS_KEY) no
 * endpoint can be registered.
 */
export class WebhookEndpoints {
  constructor(
    private readonly db: Database,
    private readonly graceSeconds: number,
    private readonly box: SecretBox | undefined,
  ) {}

  /** Throws 503 webhooks_not_configured when endpoints cannot be registered here. */
  ensureConfigured(): void {
    this.sealer();
  }

  private sealer(): SecretBox {
    if (!this.box) {
      throw new ApiError(
        503,
        'webhooks_not_configured',
        'Webhooks are not configured on this deployment (the operator has not set WEBHOOK_SECRETS_KEY). ' +
          "Follow the service's events over SSE (GET /services/{id}/events) instead.",
      );
    }
    return this.box;
  }

  async create(
    apiKeyId: string,
    fields: { url: string; serviceId?: string; events?: EventType[] },
  ): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const id = randomId('whk_');
    const secret = newSecret();
    const [endpoint] = await this.db.query<WebhookEndpoint & Record<string, unknown>>(
      `INSERT INTO webhook_endpoints (id, api_key_id, service_id, url, events, secret) VALUES ($1, $2, $3, ` +
        `$4, $5, $6) RETURNING ${PUBLIC_COLUMNS}`,
      [id, apiKeyId, fields.serviceId ?? null, fields.url, fields.events ?? null, this.sealer().seal(secret, id)],
    );
    return { endpoint, secret };
  }

  /** Seals the secrets stored in the clear before sealing existed; returns how many. */
  async sealStoredSecrets(): Promise<number> {
    if (!this.box) return 0;
    const plain = await this.db.query<
      { id: string; secret: string; previous_secret: string | null } & Record<string, unknown>
    >(
      "SELECT id, secret, previous_secret FROM webhook_endpoints WHERE secret NOT LIKE 'sealed:%' OR " +
        "previous_secret NOT LIKE 'sealed:%'",
    );
    for (const row of plain) {
      const seal = (stored: string | null) =>
        stored === null || isSealed(stored) ? stored : this.box!.seal(stored, row.id);
      await this.db.query(
        'UPDATE webhook_endpoints SET secret = $3, previous_secret = $4 WHERE id = $1 AND secret = $2',
        [row.id, row.secret, seal(row.secret), seal(row.previous_secret)],
      );
    }
    return plain.length;
  }

  async list(apiKeyId: string): Promise<WebhookEndpoint[]> {
    return this.db.query<WebhookEndpoint & Record<string, unknown>>(
      `SELECT ${PUBLIC_COLUMNS} FROM webhook_endpoints WHERE api_key_id = $1 AND deleted_at IS NULL ORDER BY ` +
        `created_at, id`,
      [apiKeyId],
    );
  }

  /** Deletes the endpoint; deliveries not yet made are dropped. False when the key has no such endpoint. */
  async remove(apiKeyId: string, id: string): Promise<boolean> {
    return this.db.transaction(async (client) => {
      const { rows } = await client.query(
        'UPDATE webhook_endpoints SET deleted_at = now() WHERE id = $1 AND api_key_id = $2 AND deleted_at IS ' +
          'NULL RETURNING id',
        [id, apiKeyId],
      );
      if (!rows.length) return false;
      await client.query(
        "UPDATE webhook_deliveries SET state = 'failed', last_error = 'endpoint deleted' WHERE endpoint_id = " +
          "$1 AND state = 'pending'",
        [id],
      );
      return true;
    });
  }

  /** A new secret; the current one keeps signing (a second v1) for the grace period. */
  async rotate(apiKeyId: string, id: string): Promise<{ endpoint: WebhookEndpoint; secret: string } | undefined> {
    const secret = newSecret();
    const [endpoint] = await this.db.query<WebhookEndpoint & Record<string, unknown>>(
      `UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_until = now() + make_interval(secs => $4), secret = $3
       WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL RETURNING ${PUBLIC_COLUMNS}`,
      [id, apiKeyId, this.sealer().seal(secret, id), this.graceSeconds],
    );
    return endpoint && { endpoint, secret };
  }
}

/** The secrets that sign a delivery now: the current one, and the previous one during its grace. */
export function signingSecrets(endpoint: EndpointSecrets, box: SecretBox | undefined, now = new Date()): string[] {
  const open = (stored: string) => {
    if (box) return box.open(stored, endpoint.endpoint_id);
    if (isSealed(stored))
      throw new Error(
        `the secret of webhook endpoint ${endpoint.endpoint_id} is sealed and WEBHOOK_SECRETS_KEY is not set`,
      );
    return stored;
  };
  return endpoint.previous_secret && endpoint.previous_secret_until && endpoint.previous_secret_until > now
    ? [open(endpoint.secret), open(endpoint.previous_secret)]
    : [open(endpoint.secret)];
}
