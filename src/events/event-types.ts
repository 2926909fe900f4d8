/** Every event an agent can receive, by webhook or SSE. */
export const EVENT_TYPES = [
  'order.paid',
  'service.active',
  'source.connected',
  'source.disconnected',
  'listeners.threshold',
  'service.expiring',
  'service.suspended',
  'service.expired',
  'upgrade.applied',
  'service.extended',
  'recordings.retained',
  'service.stopped',
  'refund.sent',
  'refund.failed',
  'track.changed',
  'service.moved',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** An event as agents receive it: the webhook body and the SSE data line. */
export interface AgentEvent {
  /** Stable: the same event delivered twice has the same id (de-duplicate on it). */
  id: string;
  type: EventType;
  created_at: string;
  service_id: string | null;
  order_id: string | null;
  data: Record<string, unknown>;
}

/** An event row with its position in the database's order. */
export interface StoredEvent extends AgentEvent {
  tx: string;
  seq: string;
}
