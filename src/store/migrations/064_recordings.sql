-- Live shows kept as archive items (src/recordings/). A row per service that set recording itself
-- (PUT /services/{id}/recording); without one, the order's `recording` parameter says whether it records.
CREATE TABLE recording_settings (
  service_id  text PRIMARY KEY REFERENCES services (id),
  enabled     boolean NOT NULL,
  feed_public boolean NOT NULL DEFAULT true,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One item per show: the source sessions of a service with less than a minute between them. The audio is the file
-- `file_name` beside the service's media, as the stream sent it; size_bytes follows the file while it records.
-- paused_at is set while no source is connected; ended_at once the show is over and its duration measured.
CREATE TABLE recordings (
  id               text PRIMARY KEY,
  service_id       text NOT NULL REFERENCES services (id),
  host_id          text,
  file_name        text NOT NULL,
  content_type     text NOT NULL,
  started_at       timestamptz NOT NULL DEFAULT now(),
  paused_at        timestamptz,
  ended_at         timestamptz,
  duration_seconds numeric(12, 3),
  size_bytes       bigint NOT NULL DEFAULT 0,
  titles           jsonb NOT NULL DEFAULT '[]',
  sessions         integer NOT NULL DEFAULT 1,
  stop_reason      text
);
CREATE INDEX recordings_service ON recordings (service_id, started_at);
-- At most one show records at a time per service.
CREATE UNIQUE INDEX recordings_open ON recordings (service_id) WHERE ended_at IS NULL;
