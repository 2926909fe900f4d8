-- What the owner's listener statistics group sessions by, worked out once when the listener is admitted: the country
-- of its network (from an IP database, src/stats/countries.ts; null when the network is private or unknown), and the
-- device class and platform its user agent names. The client's full address is not stored, here or anywhere.
ALTER TABLE listener_sessions
  ADD COLUMN country      text CHECK (country ~ '^[A-Z]{2}$'),
  ADD COLUMN device_class text,
  ADD COLUMN platform     text;

-- The one definition of a session's listening time, read by the sessions' aggregates, the statistics and compared
-- with the usage: an Icecast listener's seconds are those of Icecast's access log line once it has come (what the
-- usage adds up; before it, admission to leaving); an HLS listener's run from its first fetch until its last segment
-- has played, written when it ends (the usage's figure, without the idle wait); an open session's until now.
CREATE VIEW listener_listening AS
SELECT ls.*, ls.started_at + make_interval(secs => l.seconds) AS listened_until, l.seconds
FROM listener_sessions ls,
  LATERAL (SELECT CASE
    WHEN ls.ended_at IS NULL THEN greatest(0, extract(epoch FROM now() - ls.started_at))
    WHEN ls.protocol = 'icecast' AND ls.duration_seconds IS NOT NULL THEN ls.duration_seconds
    ELSE greatest(0, extract(epoch FROM ls.ended_at - ls.started_at)) END::double precision AS seconds) l;
