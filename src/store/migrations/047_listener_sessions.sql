-- One row per listener connection, for the owner's statistics. The client is kept only as its network (/24 of IPv4,
-- /48 of IPv6), never its full address. Opened by the listener_add callback; closed whenever its row in listeners goes
-- (listener_remove, reconciliation, a cut); bytes and the exact duration come from Icecast's access log line.
CREATE TABLE listener_sessions (
  id               bigserial PRIMARY KEY,
  service_id       text NOT NULL REFERENCES services (id),
  client_id        text NOT NULL,
  protocol         text NOT NULL DEFAULT 'icecast' CHECK (protocol IN ('icecast', 'hls')),
  client_network   text NOT NULL,
  user_agent       text NOT NULL DEFAULT '',
  started_at       timestamptz NOT NULL DEFAULT now(),
  ended_at         timestamptz,
  duration_seconds integer,
  bytes            bigint
);
CREATE INDEX listener_sessions_service ON listener_sessions (service_id, started_at DESC);
CREATE INDEX listener_sessions_open ON listener_sessions (service_id, client_id) WHERE ended_at IS NULL;
CREATE INDEX listener_sessions_unbilled ON listener_sessions (service_id, client_network) WHERE bytes IS NULL;

CREATE FUNCTION listener_session_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE listener_sessions SET ended_at = now(),
    duration_seconds = coalesce(duration_seconds, greatest(0, extract(epoch FROM now() - started_at))::integer)
  WHERE service_id = OLD.service_id AND client_id = OLD.client_id AND ended_at IS NULL;
  RETURN OLD;
END $$;
CREATE TRIGGER listener_session_ends AFTER DELETE ON listeners FOR EACH ROW EXECUTE FUNCTION listener_session_ends();
