export { EVENT_TYPES, type AgentEvent, type EventType, type StoredEvent } from './event-types.js';
export { eventInsert, eventsInsert, recordEvent, recordMountEvent, publicEvent, type NewEvent } from './event-log.js';
export { EventFeed, type FeedPosition } from './event-feed.js';
export { WebhookEndpoints, type WebhookEndpoint } from './webhook-endpoints.js';
export { webhookUrlPolicy, type WebhookUrlPolicy } from './webhook-url-policy.js';
export { postWebhook, type PostOutcome } from './webhook-post.js';
export { DeliveryWorker, retryDelaySeconds, type DeliveryOptions } from './delivery-worker.js';
export {
  signatureHeader,
  verifySignature,
  SIGNATURE_HEADER,
  EVENT_ID_HEADER,
  SIGNATURE_TOLERANCE_SECONDS,
} from './signature.js';
export {
  recordExpiringServices,
  recordListenerThreshold,
  recordStatusChange,
  type ExtendHint,
} from './service-watch.js';
export { orderPaidEvent, provisionedEvent } from './order-events.js';
export { loadSecretBox, SecretBox } from './secret-box.js';
export { SourceEventGate, type SourceEventType } from './source-event-gate.js';
