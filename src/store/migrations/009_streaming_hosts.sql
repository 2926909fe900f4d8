-- A streaming host (one Icecast) has a stable id; its public address may change (a development restart on another
-- port, a production move behind a new proxy). Services belong to a host by its id, and their stream and broadcast
-- addresses are derived from the host's current address when read.
CREATE TABLE streaming_hosts (
  id         text PRIMARY KEY,
  public_url text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- No foreign key: a host registers once its Icecast is up, and an order may be provisioned a moment before that.
ALTER TABLE services ADD COLUMN host_id text;

-- Services from before hosts had ids keep their address: each old Icecast address becomes a host of its own.
INSERT INTO streaming_hosts (id, public_url)
  SELECT DISTINCT 'url:' || icecast_url, icecast_url FROM services WHERE icecast_url IS NOT NULL;
UPDATE services SET host_id = 'url:' || icecast_url WHERE icecast_url IS NOT NULL;

-- The life-cycle worker and the capacity count select a host's services that still hold a place.
CREATE INDEX services_live_on_host ON services (host_id) WHERE status IN ('pending', 'provisioning', 'active', 'suspended');
