import type { Logger } from '../log/index.js';
import type { Client, Database } from '../store/index.js';
import { EVENT_COLUMNS, publicEvent } from './event-log.js';
import type { StoredEvent } from './event-types.js';
import { EVENT_ID_HEADER, SIGNATURE_HEADER, signatureHeader } from './signature.js';
import type { SecretBox } from './secret-box.js';
import { signingSecrets, type EndpointSecrets } from './webhook-endpoints.js';
import { postWebhook, type PostOutcome } from './webhook-post.js';
import type { WebhookUrlPolicy } from './webhook-url-policy.js';

export interface DeliveryOptions {
  /** How often the outbox is looked at when nothing wakes the worker. */
  intervalMs: number;
  /** How long a claimed delivery belongs to this instance; after that (the instance died) another one retries it. */
  leaseSeconds: number;
  timeoutMs: number;
  /** Backoff after the n-th failure: base × 2^(n-1), at most max, with ±20 % jitter. */
  retryBaseSeconds: number;
  retryMaxSeconds: number;
  /** A delivery still failing this long after its event is given up. */
  giveUpSeconds: number;
  /** An endpoint whose deliveries failed this many times in a row is disabled. */
  disableAfterFailures: number;
  batch: number;
}

interface Due extends EndpointSecrets {
  delivery_id: string;
  attempts: number;
  url: string;
  event_created_at: Date;
}

/** Seconds to wait after the n-th failed attempt (n ≥ 1). */
export function retryDelaySeconds(attempt: number, options: Pick<DeliveryOptions, 'retryBaseSeconds' | 'retryMaxSeconds'>, random = Math.random): number {
  const plain = Math.min(options.retryMaxSeconds, options.retryBaseSeconds * 2 ** Math.min(attempt - 1, 30));
  return plain * (0.8 + 0.4 * random());
}

/**
 * Delivers the webhook outbox (webhook_deliveries) at least once. Every instance runs one: a delivery is claimed with
 * FOR UPDATE SKIP LOCKED and a lease, so instances share the work, and one whose instance died is claimed again once
 * its lease ends. Failures are retried with exponential backoff and jitter, given up after giveUpSeconds.
 */
export class DeliveryWorker {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private again = false;

  constructor(
    private readonly db: Database,
    private readonly policy: WebhookUrlPolicy,
    private readonly options: DeliveryOptions,
    private readonly log: Logger,
    private readonly secrets: SecretBox | undefined,
  ) {}

  start(): void {
    this.timer = setTimeout(() => this.loop(), 0);
  }

  /** Looks at the outbox now (an event was recorded). */
  wake(): void {
    if (!this.timer) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.loop(), 0);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private loop(): void {
    this.running = this.pass().catch((err) => this.log.warn({ err }, 'webhook delivery pass failed')).finally(() => {
      this.running = undefined;
      const soon = this.again;
      this.again = false;
      if (this.timer) this.timer = setTimeout(() => this.loop(), soon ? 0 : this.options.intervalMs);
    });
  }

  /** Claims the due deliveries and makes them, one after another in event order; returns how many were attempted. */
  private async pass(): Promise<number> {
    const due = await this.db.query<Due & Record<string, unknown>>(
      `WITH claimed AS (
         UPDATE webhook_deliveries SET lease_until = now() + make_interval(secs => $2), attempts = attempts + 1
         WHERE id IN (SELECT id FROM webhook_deliveries
                      WHERE state = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
                      ORDER BY event_seq, id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING *)
       SELECT c.id::text AS delivery_id, c.attempts, c.event_seq, e.id AS endpoint_id, e.url, e.secret, e.previous_secret, e.previous_secret_until,
              ev.created_at AS event_created_at
       FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id JOIN events ev ON ev.seq = c.event_seq
       ORDER BY c.event_seq, c.id`, [this.options.batch, this.options.leaseSeconds]);
    for (const [i, delivery] of due.entries()) {
      if (!this.timer) {
        // Stopping: what was claimed but not attempted is handed back at once rather than when its lease ends.
        await this.db.query('UPDATE webhook_deliveries SET lease_until = NULL, attempts = attempts - 1 WHERE id = ANY($1::bigint[])', [due.slice(i).map((d) => d.delivery_id)]);
        return i;
      }
      await this.deliver(delivery);
    }
    return due.length;
  }

  private async deliver(delivery: Due & Record<string, unknown>): Promise<void> {
    const [event] = await this.db.query<StoredEvent & Record<string, unknown>>(`SELECT ${EVENT_COLUMNS} FROM events WHERE seq = $1`, [delivery.event_seq]);
    const body = JSON.stringify(publicEvent(event));
    const outcome = await this.signed(delivery, body).then(
      (signature) => postWebhook(delivery.url, body, { [SIGNATURE_HEADER]: signature, [EVENT_ID_HEADER]: event.id }, this.policy, this.options.timeoutMs),
      (error: Error): PostOutcome => {
        this.log.error({ err: error, endpoint_id: delivery.endpoint_id }, 'webhook secret unreadable');
        return { ok: false, error: error.message };
      });
    await this.db.transaction((client) => this.record(client, delivery, outcome));
    this.log.info({ event_id: event.id, endpoint_id: delivery.endpoint_id, attempt: delivery.attempts, status: outcome.status, error: outcome.error }, outcome.ok ? 'webhook delivered' : 'webhook delivery failed');
  }

  private async signed(delivery: Due, body: string): Promise<string> {
    return signatureHeader(signingSecrets(delivery, this.secrets), body);
  }

  private async record(client: Client, delivery: Due, outcome: PostOutcome): Promise<void> {
    if (outcome.ok) {
      await client.query(`UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now(), lease_until = NULL, last_status = $2, last_error = NULL WHERE id = $1`,
        [delivery.delivery_id, outcome.status]);
      await client.query('UPDATE webhook_endpoints SET consecutive_failures = 0 WHERE id = $1', [delivery.endpoint_id]);
      return;
    }
    const giveUp = Date.now() - delivery.event_created_at.getTime() > this.options.giveUpSeconds * 1000;
    await client.query(
      `UPDATE webhook_deliveries SET state = $2, lease_until = NULL, last_status = $3, last_error = $4,
         next_attempt_at = now() + make_interval(secs => $5) WHERE id = $1`,
      [delivery.delivery_id, giveUp ? 'failed' : 'pending', outcome.status ?? null, outcome.error ?? null, retryDelaySeconds(delivery.attempts, this.options)]);
    const { rows: [endpoint] } = await client.query(
      'UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1 WHERE id = $1 RETURNING consecutive_failures', [delivery.endpoint_id]);
    if (endpoint && endpoint.consecutive_failures >= this.options.disableAfterFailures) {
      await client.query(
        `UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = $2 WHERE id = $1 AND disabled_at IS NULL`,
        [delivery.endpoint_id, `disabled after ${endpoint.consecutive_failures} failed deliveries in a row (last: ${outcome.error ?? 'no answer'}); register it again when it answers`]);
      await client.query(`UPDATE webhook_deliveries SET state = 'failed', last_error = 'endpoint disabled' WHERE endpoint_id = $1 AND state = 'pending'`, [delivery.endpoint_id]);
    }
  }
}
