-- Losing a host: the services of a host that missed its heartbeat are moved to hosts with room. Each move
-- is kept: where from and to, the host epoch it gave the service, how long the stream was unavailable and the time
-- credited for it (added to expires_at). Operators read it to audit moves; nothing is derived from it.
CREATE TABLE service_moves (
  id               bigserial PRIMARY KEY,
  service_id       text NOT NULL REFERENCES services (id),
  from_host        text NOT NULL,
  to_host          text NOT NULL,
  host_epoch       integer NOT NULL,
  -- The lost host's last heartbeat: the stream is counted unavailable from then until the move.
  unavailable_from timestamptz NOT NULL,
  down_since       timestamptz,
  moved_at         timestamptz NOT NULL DEFAULT now(),
  credited_seconds integer NOT NULL CHECK (credited_seconds >= 0),
  expires_before   timestamptz,
  expires_after    timestamptz
);
CREATE INDEX service_moves_by_service ON service_moves (service_id, moved_at);

-- The monitor looks for live services of down hosts on every pass.
CREATE INDEX streaming_hosts_down ON streaming_hosts (id) WHERE state = 'down';
