-- Fair webhook delivery (src/events/delivery-worker.ts): deliveries are claimed one per endpoint at a time, a few per
-- API key at a time, and endpoints that answer slowly (slow_until) share a few of an instance's slots, so one buyer's
-- backlog cannot hold up another buyer's deliveries.
ALTER TABLE webhook_endpoints ADD COLUMN slow_until timestamptz;
-- The claim looks for each endpoint's first pending delivery, and for the deliveries being made now.
CREATE INDEX webhook_deliveries_pending_by_endpoint ON webhook_deliveries (endpoint_id, event_seq, id) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (lease_until) WHERE state = 'pending' AND lease_until IS NOT NULL;

-- source.connected / source.disconnected of a service are recorded at most twice per window (EVENTS_SOURCE_WINDOW_SECONDS);
-- a change beyond that is held (the latest state only) and recorded when the window ends (src/events/source-event-gate.ts).
CREATE TABLE source_event_gates (
  service_id   text PRIMARY KEY REFERENCES services (id),
  last_type    text,
  window_start timestamptz,
  window_count integer NOT NULL DEFAULT 0,
  held_type    text
);
CREATE INDEX source_event_gates_held ON source_event_gates (window_start) WHERE held_type IS NOT NULL;
