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
  /** Deliveries this instance makes at the same time. */
  concurrency: number;
  /** Deliveries to the endpoints of one API key made at the same time, over all instances. */
  perKey: number;
  /** Of this instance's slots, how many endpoints marked slow may hold at the same time. */
  slowSlots: number;
  /** An attempt that takes this long (or times out) marks its endpoint slow for slowSeconds. */
  slowMs: number;
  slowSeconds: number;
}

interface Due extends EndpointSecrets {
  delivery_id: string;
  attempts: number;
  url: string;
  event_created_at: Date;
  slow: boolean;
}

/** Any constant: claims hold it for their transaction, so that two instances never claim at the same time. */
const CLAIM_LOCK = 0x77686b31;

/**
 * The next deliveries to make, fairly: each endpoint's first due delivery, unless one of its deliveries is being made
 * (by any instance); looked up per live endpoint (an index probe each), so the cost follows the endpoints, not the
 * backlog; within an API key in event order, at most $3 in flight per key (counting those being made), and
 * across keys round-robin (every key's first before any key's second); endpoints marked slow take at most $4 of them.
 */
const PICK = `
  busy AS (
    SELECT d.endpoint_id, e.api_key_id FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
    WHERE d.state = 'pending' AND d.lease_until >= now()),
  heads AS (
    SELECT h.id, h.event_seq, e.api_key_id, coalesce(e.slow_until > now(), false) AS slow
    FROM webhook_endpoints e CROSS JOIN LATERAL (
      SELECT d.id, d.event_seq FROM webhook_deliveries d
      WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= now()
        AND (d.lease_until IS NULL OR d.lease_until < now())
      ORDER BY d.event_seq, d.id LIMIT 1) h
    WHERE e.deleted_at IS NULL AND e.disabled_at IS NULL AND NOT EXISTS (SELECT 1 FROM busy b WHERE b.endpoint_id = e.id)),
  ranked AS (
    SELECT h.*, row_number() OVER (PARTITION BY h.api_key_id ORDER BY h.event_seq, h.id)
                + (SELECT count(*) FROM busy b WHERE b.api_key_id = h.api_key_id) AS key_rank
    FROM heads h),
  lanes AS (
    SELECT r.*, row_number() OVER (PARTITION BY r.slow ORDER BY r.key_rank, r.event_seq, r.id) AS lane_rank
    FROM ranked r WHERE r.key_rank <= $3),
  picked AS (
    SELECT id, slow FROM lanes WHERE NOT slow OR lane_rank <= $4 ORDER BY key_rank, event_seq, id LIMIT $1)`;

/** Seconds to wait after the n-th failed attempt (n ≥ 1). */
export function retryDelaySeconds(
  attempt: number,
  options: Pick<DeliveryOptions, 'retryBaseSeconds' | 'retryMaxSeconds'>,
  random = Math.random,
): number {
  const plain = Math.min(options.retryMaxSeconds, options.retryBaseSeconds * 2 ** Math.min(attempt - 1, 30));
  return plain * (0.8 + 0.4 * random());
}

/** What a DeliveryWorker works with. */
export interface DeliveryWorkerDeps {
  db: Database;
  /** Which endpoint addresses may be called, checked at each delivery. */
  policy: WebhookUrlPolicy;
  options: DeliveryOptions;
  log: Logger;
  /** Opens the endpoints' sealed signing secrets; without it, only secrets stored in the clear can sign. */
  secrets?: SecretBox;
}

/**
 * Delivers the webhook outbox (webhook_deliveries) at least once. Every instance runs one, making up to `concurrency`
 * deliveries at a time: a delivery is claimed with a lease, so instances share the work, and one whose instance died
 * is claimed again once its lease ends. Claims are fair (PICK): one delivery per endpoint at a time, `perKey` per API
 * key, round-robin over keys, and endpoints that answer slowly share `slowSlots`, so a buyer with many slow endpoints
 * and a long backlog leaves the other slots to everyone else. Failures are retried with exponential backoff and
 * jitter, given up after giveUpSeconds.
 */
export class DeliveryWorker {
  private timer?: NodeJS.Timeout;
  private started = false;
  private stopping = false;
  private filling?: Promise<void>;
  private again = false;
  /** Deliveries being made, by delivery id: whether their endpoint is slow, and when they end. */
  private readonly inFlight = new Map<string, { slow: boolean; done: Promise<void> }>();

  private readonly db: Database;
  private readonly policy: WebhookUrlPolicy;
  private readonly options: DeliveryOptions;
  private readonly log: Logger;
  private readonly secrets: SecretBox | undefined;

  constructor(deps: DeliveryWorkerDeps) {
    this.db = deps.db;
    this.policy = deps.policy;
    this.options = deps.options;
    this.log = deps.log;
    this.secrets = deps.secrets;
  }

  start(): void {
    this.started = true;
    this.fill();
  }

  /** Looks at the outbox now (an event was recorded, or a slot came free). */
  wake(): void {
    if (this.started && !this.stopping) this.fill();
  }

  /** Claims nothing more and waits for the deliveries being made (each ends within timeoutMs). */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await this.filling;
    await Promise.all([...this.inFlight.values()].map((d) => d.done));
  }

  private fill(): void {
    if (this.filling) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    const claimed = this.claimAndStart().catch((err) => this.log.warn({ err }, 'webhook delivery claim failed'));
    this.filling = claimed.finally(() => {
      this.filling = undefined;
      if (this.stopping) return;
      const soon = this.again;
      this.again = false;
      if (soon) this.fill();
      else this.timer = setTimeout(() => this.fill(), this.options.intervalMs);
    });
  }

  /** Claims as many due deliveries as there are free slots and starts them. */
  private async claimAndStart(): Promise<void> {
    const free = this.options.concurrency - this.inFlight.size;
    if (free <= 0 || this.stopping) return;
    const slowBusy = [...this.inFlight.values()].filter((d) => d.slow).length;
    const due = await this.claim(free, Math.max(0, this.options.slowSlots - slowBusy));
    for (const delivery of due) {
      const done = this.deliver(delivery)
        .catch((err) => this.log.warn({ err, endpoint_id: delivery.endpoint_id }, 'webhook delivery failed to record'))
        .finally(() => {
          this.inFlight.delete(delivery.delivery_id);
          this.wake();
        });
      this.inFlight.set(delivery.delivery_id, { slow: delivery.slow, done });
    }
  }

  private async claim(limit: number, slowLimit: number): Promise<Array<Due & Record<string, unknown>>> {
    // Most polls find nothing due: one indexed look, before the claim's lock and transaction.
    if (!(await this.anyDue())) return [];
    return this.db.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [CLAIM_LOCK]);
      const { rows } = await client.query<Due & Record<string, unknown>>(
        `WITH ${PICK},
         claimed AS (
           UPDATE webhook_deliveries d SET lease_until = now() + make_interval(secs => $2), attempts = attempts + 1
           FROM picked p WHERE d.id = p.id RETURNING d.*, p.slow)
         SELECT c.id::text AS delivery_id, c.attempts, c.event_seq, c.slow, e.id AS endpoint_id, e.url, e.secret,
                e.previous_secret, e.previous_secret_until, ev.created_at AS event_created_at
         FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id JOIN events ev ON ev.seq = c.event_seq
         ORDER BY c.event_seq, c.id`,
        [limit, this.options.leaseSeconds, this.options.perKey, slowLimit],
      );
      return rows;
    });
  }

  private async anyDue(): Promise<boolean> {
    const [row] = await this.db.query<{ due: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= now()
       AND (lease_until IS NULL OR lease_until < now())) AS due`,
    );
    return row?.due === true;
  }

  private async deliver(delivery: Due & Record<string, unknown>): Promise<void> {
    const [event] = await this.db.query<StoredEvent & Record<string, unknown>>(
      `SELECT ${EVENT_COLUMNS} FROM events WHERE seq = $1`,
      [delivery.event_seq],
    );
    const body = JSON.stringify(publicEvent(event));
    const started = Date.now();
    const outcome = await this.signed(delivery, body).then(
      (signature) =>
        postWebhook(
          delivery.url,
          body,
          { [SIGNATURE_HEADER]: signature, [EVENT_ID_HEADER]: event.id },
          this.policy,
          this.options.timeoutMs,
        ),
      (error: Error): PostOutcome => {
        this.log.error({ err: error, endpoint_id: delivery.endpoint_id }, 'webhook secret unreadable');
        return { ok: false, error: error.message };
      },
    );
    const slow = Date.now() - started >= this.options.slowMs;
    await this.db.transaction(async (client) => {
      await this.record(client, delivery, outcome);
      await this.markPace(client, delivery, slow, outcome.ok);
    });
    this.log.info(
      {
        event_id: event.id,
        endpoint_id: delivery.endpoint_id,
        attempt: delivery.attempts,
        status: outcome.status,
        error: outcome.error,
      },
      outcome.ok ? 'webhook delivered' : 'webhook delivery failed',
    );
  }

  /** A slow answer (or none) moves the endpoint to the slow lane for a while; a quick success takes it out. */
  private async markPace(client: Client, delivery: Due, slow: boolean, ok: boolean): Promise<void> {
    if (slow) {
      await client.query('UPDATE webhook_endpoints SET slow_until = now() + make_interval(secs => $2) WHERE id = $1', [
        delivery.endpoint_id,
        this.options.slowSeconds,
      ]);
    } else if (ok && delivery.slow) {
      await client.query('UPDATE webhook_endpoints SET slow_until = NULL WHERE id = $1', [delivery.endpoint_id]);
    }
  }

  private async signed(delivery: Due, body: string): Promise<string> {
    return signatureHeader(signingSecrets(delivery, this.secrets), body);
  }

  private async record(client: Client, delivery: Due, outcome: PostOutcome): Promise<void> {
    if (outcome.ok) {
      await client.query(
        `UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now(), lease_until = NULL, ` +
          `last_status = $2, last_error = NULL WHERE id = $1`,
        [delivery.delivery_id, outcome.status],
      );
      await client.query('UPDATE webhook_endpoints SET consecutive_failures = 0 WHERE id = $1', [delivery.endpoint_id]);
      return;
    }
    const giveUp = Date.now() - delivery.event_created_at.getTime() > this.options.giveUpSeconds * 1000;
    await client.query(
      // AND state = 'pending': a delivery dropped meanwhile (its endpoint deleted or disabled) stays dropped.
      `UPDATE webhook_deliveries SET state = $2, lease_until = NULL, last_status = $3, last_error = $4,
         next_attempt_at = now() + make_interval(secs => $5) WHERE id = $1 AND state = 'pending'`,
      [
        delivery.delivery_id,
        giveUp ? 'failed' : 'pending',
        outcome.status ?? null,
        outcome.error ?? null,
        retryDelaySeconds(delivery.attempts, this.options),
      ],
    );
    const {
      rows: [endpoint],
    } = await client.query(
      'UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1 WHERE id = $1 RETURNING ' +
        'consecutive_failures',
      [delivery.endpoint_id],
    );
    if (endpoint && endpoint.consecutive_failures >= this.options.disableAfterFailures) {
      await client.query(
        `UPDATE webhook_endpoints SET disabled_at = now(), disabled_reason = $2 WHERE id = $1 AND disabled_at IS NULL`,
        [
          delivery.endpoint_id,
          `disabled after ${endpoint.consecutive_failures} failed deliveries in a row (last: ` +
            `${outcome.error ?? 'no answer'}); register it again when it answers`,
        ],
      );
      await client.query(
        `UPDATE webhook_deliveries SET state = 'failed', last_error = 'endpoint disabled' WHERE endpoint_id ` +
          `= $1 AND state = 'pending'`,
        [delivery.endpoint_id],
      );
    }
  }
}
