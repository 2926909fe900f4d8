-- Instances cache verified API keys in memory (src/keys/revocation-listener.ts); a revocation, however it is made
-- (keys revoke, SQL by hand), is pushed to every instance at commit so that none keeps accepting the key.
CREATE FUNCTION api_key_revoked_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('api_key_revoked', NEW.id);
  RETURN NEW;
END;
$$;

CREATE TRIGGER api_key_revoked_notify
  AFTER UPDATE OF revoked_at ON api_keys
  FOR EACH ROW WHEN (NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS DISTINCT FROM NEW.revoked_at)
  EXECUTE FUNCTION api_key_revoked_notify();
