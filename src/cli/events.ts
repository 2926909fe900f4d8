import {
  DeliveryWorker,
  EventFeed,
  loadSecretBox,
  SourceEventGate,
  WebhookEndpoints,
  webhookUrlPolicy,
} from '../events/index.js';
import type { EventsApi } from '../http/index.js';
import type { Logger } from '../log/index.js';
import type { Database } from '../store/index.js';
import type { Config } from './config.js';

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
 * Webhooks and SSE as configured. WEBHOOK_ALLOW_INSECURE_LOOPBACK (tests and development only, refused in production
 * by the configuration) lets webhooks go to http on loopback.
 */
export async function events(
  db: Database,
  log: Logger,
  config: Pick<Config, 'dataDir' | 'production' | 'events'>,
): Promise<Events> {
  const settings = config.events;
  const policy = webhookUrlPolicy({ insecureLoopback: settings.insecureLoopback });
  const feed = new EventFeed(db, log);
  await feed.start();
  const secrets = await loadSecretBox({
    dataDir: config.dataDir,
    production: config.production,
    key: settings.secretsKey,
    keyFile: settings.secretsKeyFile,
  });
  if (!secrets)
    log.warn(
      { setting: 'WEBHOOK_SECRETS_KEY' },
      'webhooks are off: set WEBHOOK_SECRETS_KEY (32 random bytes in base64) to offer them; SSE works without it',
    );
  const endpoints = new WebhookEndpoints(db, settings.secretGraceSeconds, secrets);
  const sealed = await endpoints.sealStoredSecrets();
  if (sealed) log.info({ endpoints: sealed }, 'webhook secrets stored in the clear are sealed now');
  const worker = new DeliveryWorker({ db, policy, options: settings.delivery, log, secrets });
  const sourceEvents = new SourceEventGate(db, settings.sourceWindowSeconds, log);
  feed.onDeliveries(() => worker.wake());
  let stopped: Promise<void> | undefined;
  return {
    api: {
      endpoints,
      feed,
      policy,
      maxEndpointsPerKey: 20,
      heartbeatMs: settings.heartbeatMs,
      maxStreamsPerKey: settings.maxStreamsPerKey,
      maxStreamsPerService: settings.maxStreamsPerService,
    },
    sourceEvents,
    start: () => {
      worker.start();
      sourceEvents.start();
    },
    stop: () =>
      (stopped ??= feed.close().then(async () => {
        await Promise.all([worker.stop(), sourceEvents.stop()]);
      })),
  };
}
