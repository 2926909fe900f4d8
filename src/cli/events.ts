import {
  DeliveryWorker, deliveryOptionsFromEnv, EventFeed, expiringLeadSecondsFromEnv, loadSecretBox, SourceEventGate, WebhookEndpoints,
  webhookUrlPolicy,
} from '../events/index.js';
import type { EventsApi } from '../http/index.js';
import type { Logger } from '../log/index.js';
import type { Database } from '../store/index.js';
import type { Config } from './config.js';

type EventsConfig = Pick<Config, 'dataDir' | 'production' | 'webhookConcurrency' | 'webhookConcurrencyPerKey' | 'webhookSlowSlots'
  | 'eventStreamsPerKey' | 'eventStreamsPerService' | 'sourceEventWindowSeconds'>;

export interface Events {
  api: EventsApi;
  /** Starts delivering webhooks (after the HTTP server listens). */
  start(): void;
  /** Records source.connected / .disconnected, at most a pair per service per window (Icecast's callbacks use it). */
  sourceEvents: SourceEventGate;
  /** Ends every SSE stream and the delivery worker; before the HTTP server closes, so it does not wait for them. */
  stop(): Promise<void>;
}

/**
 * Webhooks and SSE, configured from the environment. WEBHOOK_ALLOW_INSECURE_LOOPBACK=1 (tests and development only)
 * lets webhooks go to http on loopback; it is refused in production.
 */
export async function events(db: Database, log: Logger, config: EventsConfig, env: NodeJS.ProcessEnv = process.env): Promise<Events> {
  const { production } = config;
  const insecureLoopback = env.WEBHOOK_ALLOW_INSECURE_LOOPBACK === '1';
  if (insecureLoopback && production) throw new Error('WEBHOOK_ALLOW_INSECURE_LOOPBACK is for tests and development only; unset it in production (webhooks need https on public addresses)');
  expiringLeadSecondsFromEnv(env); // refuses a bad value at start rather than in the life-cycle worker
  const policy = webhookUrlPolicy({ insecureLoopback });
  const feed = new EventFeed(db, log);
  await feed.start();
  const secrets = await loadSecretBox({ ...config, env });
  if (!secrets) log.warn({ setting: 'WEBHOOK_SECRETS_KEY' }, 'webhooks are off: set WEBHOOK_SECRETS_KEY (32 random bytes in base64) to offer them; SSE works without it');
  const endpoints = new WebhookEndpoints(db, Number(env.WEBHOOK_SECRET_GRACE_SECONDS ?? 86_400), secrets);
  const sealed = await endpoints.sealStoredSecrets();
  if (sealed) log.info({ endpoints: sealed }, 'webhook secrets stored in the clear are sealed now');
  const fairness = {
    concurrency: config.webhookConcurrency, perKey: config.webhookConcurrencyPerKey, slowSlots: config.webhookSlowSlots,
  };
  const worker = new DeliveryWorker(db, policy, deliveryOptionsFromEnv(env, fairness), log, secrets);
  const sourceEvents = new SourceEventGate(db, config.sourceEventWindowSeconds, log);
  feed.onEvent(() => worker.wake());
  let stopped: Promise<void> | undefined;
  return {
    api: {
      endpoints,
      feed,
      policy,
      maxEndpointsPerKey: 20,
      heartbeatMs: Number(env.EVENTS_HEARTBEAT_MS ?? 15_000),
      maxStreamsPerKey: config.eventStreamsPerKey,
      maxStreamsPerService: config.eventStreamsPerService,
    },
    sourceEvents,
    start: () => {
      worker.start();
      sourceEvents.start();
    },
    stop: () => (stopped ??= feed.close().then(async () => {
      await Promise.all([worker.stop(), sourceEvents.stop()]);
    })),
  };
}
