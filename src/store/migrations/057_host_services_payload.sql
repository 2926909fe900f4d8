-- A woken host reconciler reads only the services it is told about: each read every live service of its
-- host, which grew with them and cost more per sale than the sale's own statements. The payload of host_services
-- becomes '<host id> <service id>' (service ids hold no space); a payload of the host id alone still asks for a full
-- pass (the owner's title, src/services/now-playing.ts). Sent at commit, once per service, host and transaction.
CREATE OR REPLACE FUNCTION services_notify_host() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.host_id IS NOT NULL THEN
    PERFORM pg_notify('host_services', NEW.host_id || ' ' || NEW.id);
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.host_id IS DISTINCT FROM NEW.host_id AND OLD.host_id IS NOT NULL THEN
    PERFORM pg_notify('host_services', OLD.host_id || ' ' || OLD.id);
  END IF;
  RETURN NULL;
END
$$;
