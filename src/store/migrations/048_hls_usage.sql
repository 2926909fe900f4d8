-- What HLS listeners used, per service, added to the Icecast mount's usage (src/hls). Saved on every life-cycle pass,
-- so it survives a restart; sessions still open count from the HLS manager's memory until they end.
CREATE TABLE hls_usage (
  service_id        text PRIMARY KEY REFERENCES services (id),
  -- Playlist and segment bytes written to HLS clients (response bodies).
  bytes_sent        bigint NOT NULL DEFAULT 0,
  -- Whole milliseconds of finished HLS sessions.
  listener_ms       bigint NOT NULL DEFAULT 0,
  sessions          integer NOT NULL DEFAULT 0,
  -- The highest count of Icecast and HLS listeners together seen at one pass.
  peak_listeners    integer NOT NULL DEFAULT 0,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
