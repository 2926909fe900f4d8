-- A streaming host answers Icecast's listener callbacks from memory (src/services/listener-places.ts): every change to
-- what decides an admission (status, expiry, listener cap, mount, host, stop) is pushed to it at commit, with the
-- service's id, so that no listener is admitted after a stop, an expiry moved back, a lower cap or a move to another
-- host. The host also reloads everything on a timer, in case a notification was lost.
CREATE FUNCTION service_admission_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE'
     AND NEW.status IS NOT DISTINCT FROM OLD.status
     AND NEW.expires_at IS NOT DISTINCT FROM OLD.expires_at
     AND NEW.limits IS NOT DISTINCT FROM OLD.limits
     AND NEW.mount IS NOT DISTINCT FROM OLD.mount
     AND NEW.host_id IS NOT DISTINCT FROM OLD.host_id
     AND NEW.stopped_at IS NOT DISTINCT FROM OLD.stopped_at THEN
    RETURN NULL;
  END IF;
  PERFORM pg_notify('service_admission', CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
  RETURN NULL;
END;
$$;

CREATE TRIGGER service_admission_notify
  AFTER INSERT OR UPDATE OR DELETE ON services
  FOR EACH ROW EXECUTE FUNCTION service_admission_notify();
