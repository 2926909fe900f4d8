-- Placement across the host pool. An order is placed on a host when its payment is claimed, under the
-- placement lock: the host is recorded with the order, so that every instance counts the order on that host until
-- its service exists (the service is then created there).
ALTER TABLE orders ADD COLUMN host_id text;

-- A streaming host runs what PostgreSQL says runs on it. Every change of where a service runs, whether it may stream
-- or what it may carry wakes that host's reconciler (src/hosts/host-reconciler.ts) through the channel
-- host_services, the host id as payload; for a move, both the old and the new host. Sent at commit, once per host
-- and transaction.
CREATE FUNCTION services_notify_host() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.host_id IS NOT NULL THEN
    PERFORM pg_notify('host_services', NEW.host_id);
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.host_id IS DISTINCT FROM NEW.host_id AND OLD.host_id IS NOT NULL THEN
    PERFORM pg_notify('host_services', OLD.host_id);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER services_host_insert AFTER INSERT ON services
  FOR EACH ROW EXECUTE FUNCTION services_notify_host();
CREATE TRIGGER services_host_update AFTER UPDATE OF status, host_id, host_epoch, limits, expires_at ON services
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.host_id IS DISTINCT FROM NEW.host_id
                     OR OLD.host_epoch IS DISTINCT FROM NEW.host_epoch OR OLD.limits IS DISTINCT FROM NEW.limits
                     OR OLD.expires_at IS DISTINCT FROM NEW.expires_at)
  EXECUTE FUNCTION services_notify_host();
