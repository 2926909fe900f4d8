-- What happened to an agent's orders and services, in one order per database (seq), for webhooks and SSE: src/events/.
CREATE TABLE events (
  seq        bigserial PRIMARY KEY,
  id         text NOT NULL UNIQUE,
  type       text NOT NULL,
  api_key_id text NOT NULL,
  service_id text,
  order_id   text,
  data       jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Readers go by (tx, seq) and show an event once every transaction older than its own has ended, so none is
  -- skipped (sequence numbers are taken before commit, and commits may come out of order): src/events/event-log.ts.
  tx         xid8 NOT NULL DEFAULT pg_current_xact_id(),
  -- Events emitted at most once (service.expiring per service and expiry time): a second insert is ignored.
  once_key   text UNIQUE
);
CREATE INDEX events_by_service ON events (service_id, tx, seq);
CREATE INDEX events_by_order ON events (order_id);

-- Where an agent wants events delivered: for every service of its API key, or for one service.
CREATE TABLE webhook_endpoints (
  id                   text PRIMARY KEY,
  api_key_id           text NOT NULL REFERENCES api_keys (id),
  service_id           text REFERENCES services (id),
  url                  text NOT NULL,
  -- null: every event type.
  events               text[],
  -- The HMAC key must be recoverable to sign with it; it is never shown again after creation or rotation.
  secret               text NOT NULL,
  previous_secret      text,
  previous_secret_until timestamptz,
  consecutive_failures integer NOT NULL DEFAULT 0,
  disabled_at          timestamptz,
  disabled_reason      text,
  created_at           timestamptz NOT NULL DEFAULT now(),
  deleted_at           timestamptz
);
CREATE INDEX webhook_endpoints_by_key ON webhook_endpoints (api_key_id) WHERE deleted_at IS NULL;

-- The outbox: one row per endpoint and event, delivered at least once by any instance's worker.
CREATE TABLE webhook_deliveries (
  id              bigserial PRIMARY KEY,
  endpoint_id     text NOT NULL REFERENCES webhook_endpoints (id),
  event_seq       bigint NOT NULL REFERENCES events (seq),
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  lease_until     timestamptz,
  last_status     integer,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  UNIQUE (endpoint_id, event_seq)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';

-- Every event, whichever code records it, fans out to the matching endpoints and wakes the readers, in its own
-- transaction: the outbox rows commit (and the notification is sent) with the state change, or not at all.
CREATE FUNCTION events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_deliveries (endpoint_id, event_seq)
  SELECT e.id, NEW.seq FROM webhook_endpoints e
  WHERE e.api_key_id = NEW.api_key_id AND e.deleted_at IS NULL AND e.disabled_at IS NULL
    AND (e.service_id IS NULL OR e.service_id = NEW.service_id)
    AND (e.events IS NULL OR NEW.type = ANY (e.events));
  PERFORM pg_notify('agent_audio_events', coalesce(NEW.service_id, ''));
  RETURN NEW;
END $$;
CREATE TRIGGER events_fan_out AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION events_fan_out();
