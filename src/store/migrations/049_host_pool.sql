-- A pool of streaming hosts. Each host registers what it carries and beats while it runs; placement reads
-- this, and a host whose heartbeat is older than the bound is marked down and its services are moved.
ALTER TABLE streaming_hosts
  ADD COLUMN state          text NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'draining', 'down')),
  ADD COLUMN max_sources    integer CHECK (max_sources > 0),
  ADD COLUMN max_listeners  integer CHECK (max_listeners > 0),
  ADD COLUMN bandwidth_kbps bigint CHECK (bandwidth_kbps > 0),
  ADD COLUMN heartbeat_at   timestamptz,
  ADD COLUMN started_at     timestamptz,
  ADD COLUMN down_since     timestamptz;

-- Fencing: a move to another host increments the epoch; callbacks and reconcilers act only for the current one.
ALTER TABLE services ADD COLUMN host_epoch integer NOT NULL DEFAULT 0;
