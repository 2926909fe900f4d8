-- Where a service streams (its Icecast), why its status last changed, what it used, what plays on it.
ALTER TABLE services
  ADD COLUMN icecast_url text,
  ADD COLUMN status_reason text,
  ADD COLUMN usage jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN playlist jsonb,
  ADD COLUMN shuffle boolean NOT NULL DEFAULT false;

-- Every status change and enforcement, with the rule that decided it.
CREATE TABLE service_events (
  id         bigserial PRIMARY KEY,
  service_id text NOT NULL REFERENCES services (id),
  at         timestamptz NOT NULL DEFAULT now(),
  kind       text NOT NULL,
  from_status text,
  to_status  text,
  code       text,
  reason     text NOT NULL
);
CREATE INDEX service_events_by_service ON service_events (service_id, id);

-- Audio uploaded for AutoDJ; bytes count against the service's storage_mb.
CREATE TABLE service_files (
  service_id       text NOT NULL REFERENCES services (id),
  name             text NOT NULL,
  size_bytes       bigint NOT NULL,
  format           text NOT NULL,
  duration_seconds numeric,
  artist           text,
  title            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (service_id, name)
);

-- The usage meter of each Icecast (cumulative counters, access-log position), kept across restarts.
CREATE TABLE meter_state (
  icecast_url text PRIMARY KEY,
  state       jsonb NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
