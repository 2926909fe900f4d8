-- What a service plays: one row per track, the newest is what plays now. AutoDJ writes each file's tags, the
-- life-cycle worker the title a live encoder sent (Icecast's stats), the owner what it sets by PUT now-playing.
CREATE TABLE now_playing (
  id          bigserial PRIMARY KEY,
  service_id  text NOT NULL REFERENCES services (id),
  title       text NOT NULL,
  artist      text,
  source      text NOT NULL CHECK (source IN ('autodj', 'live', 'owner')),
  started_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX now_playing_service ON now_playing (service_id, id DESC);
