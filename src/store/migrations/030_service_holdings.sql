-- What each Icecast host, API key and paying address holds, kept up to date instead of summed at every purchase.
-- A purchase checks capacity and buyer limits five times (key before payment; host, key and payer in the
-- claim), and each check summed every live service of its holder: PostgreSQL's CPU per purchase grew with the number
-- of live services, from 12.7 to 22.3 ms over 1,200 purchases of one key (docs/benchmarks.md). Now a check reads one
-- counter row and the few services whose time is up but whose status the life-cycle worker has not changed yet.

-- Blocks service writes of instances still on the previous code until the counters below start from a full count.
LOCK TABLE services IN SHARE ROW EXCLUSIVE MODE;

-- The listener places a service was sold, whichever way its product names them (listenerCapOf in the code).
CREATE FUNCTION listener_places(limits jsonb) RETURNS numeric LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT COALESCE((limits->>'max_listeners')::numeric, (limits->>'listeners')::numeric, (limits->>'max_concurrent_listeners')::numeric, 0)
$$;

-- The paying address of the service's order (lower case), so that a payer's services are found without the join.
ALTER TABLE services ADD COLUMN payer text;
UPDATE services s SET payer = o.payer FROM orders o WHERE o.id = s.order_id;

CREATE FUNCTION services_payer_of_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.payer IS NULL THEN
    NEW.payer := (SELECT o.payer FROM orders o WHERE o.id = NEW.order_id);
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER services_payer BEFORE INSERT ON services FOR EACH ROW EXECUTE FUNCTION services_payer_of_order();

-- Services whose status holds a place (pending, provisioning, active, suspended), whatever their expires_at: a
-- service is live when it holds a place and has not expired, so what is live is this minus the services holding a
-- place whose expires_at has passed.
CREATE TABLE service_holdings (
  scope           text NOT NULL CHECK (scope IN ('host', 'key', 'payer')),
  holder          text NOT NULL,
  services        integer NOT NULL,
  listener_places numeric NOT NULL,
  PRIMARY KEY (scope, holder)
);

INSERT INTO service_holdings (scope, holder, services, listener_places)
  SELECT scope, holder, count(*), sum(listener_places(limits))
    FROM services, LATERAL (VALUES ('host', host_id), ('key', api_key_id), ('payer', payer)) AS h(scope, holder)
   WHERE status IN ('pending', 'provisioning', 'active', 'suspended') AND holder IS NOT NULL
   GROUP BY scope, holder;

-- Applied when the writing transaction commits (deferred): a counter row is locked only for the commit, not while a
-- settlement waits for the chain checkpoint, and its rows are taken in (scope, holder) order, so writers of the same
-- counters queue instead of deadlocking.
CREATE FUNCTION service_holdings_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  scopes text[] := '{}';
  holders text[] := '{}';
  counts integer[] := '{}';
  places numeric[] := '{}';
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.status IN ('pending', 'provisioning', 'active', 'suspended') THEN
    scopes := scopes || ARRAY['host', 'key', 'payer'];
    holders := holders || ARRAY[OLD.host_id, OLD.api_key_id, OLD.payer];
    counts := counts || ARRAY[-1, -1, -1];
    places := places || array_fill(-listener_places(OLD.limits), ARRAY[3]);
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.status IN ('pending', 'provisioning', 'active', 'suspended') THEN
    scopes := scopes || ARRAY['host', 'key', 'payer'];
    holders := holders || ARRAY[NEW.host_id, NEW.api_key_id, NEW.payer];
    counts := counts || ARRAY[1, 1, 1];
    places := places || array_fill(listener_places(NEW.limits), ARRAY[3]);
  END IF;
  INSERT INTO service_holdings AS h (scope, holder, services, listener_places)
    SELECT d.scope, d.holder, sum(d.n), sum(d.places)
      FROM unnest(scopes, holders, counts, places) AS d(scope, holder, n, places)
     WHERE d.holder IS NOT NULL
     GROUP BY d.scope, d.holder
    HAVING sum(d.n) <> 0 OR sum(d.places) <> 0
     ORDER BY d.scope, d.holder
  ON CONFLICT (scope, holder) DO UPDATE
    SET services = h.services + EXCLUDED.services, listener_places = h.listener_places + EXCLUDED.listener_places;
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER services_holdings
  AFTER INSERT OR UPDATE OF status, limits, host_id, api_key_id, payer OR DELETE ON services
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION service_holdings_apply();

-- The services of a holder that still hold a place, by expiry: those whose time is up (subtracted from the counter)
-- and the next to end (a refusal's Retry-After) are read from the index, not from every live service.
DROP INDEX services_live_on_host;
DROP INDEX services_live_by_key;
CREATE INDEX services_live_on_host ON services (host_id, expires_at) WHERE status IN ('pending', 'provisioning', 'active', 'suspended');
CREATE INDEX services_live_by_key ON services (api_key_id, expires_at) WHERE status IN ('pending', 'provisioning', 'active', 'suspended');
CREATE INDEX services_live_by_payer ON services (payer, expires_at) WHERE status IN ('pending', 'provisioning', 'active', 'suspended');
