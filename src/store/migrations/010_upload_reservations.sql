-- Storage held by uploads in progress: counted against storage_mb before the body streams in, so parallel uploads
-- cannot together put more than the quota on disk. A row outlives a crashed instance only until expires_at (the
-- uploading instance renews it while the upload runs).
CREATE TABLE upload_reservations (
  id         text PRIMARY KEY,
  service_id text NOT NULL REFERENCES services (id),
  bytes      bigint NOT NULL CHECK (bytes > 0),
  expires_at timestamptz NOT NULL
);
CREATE INDEX upload_reservations_by_service ON upload_reservations (service_id, expires_at);
