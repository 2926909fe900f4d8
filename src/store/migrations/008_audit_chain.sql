-- Audit chain, format 2: each link covers every stored field of its record, not only the record text:
--   entry_hash = sha256('audit/2' \n seq \n id \n kind \n snapshot_hash \n subject \n record_hash \n created_at)
--   chain_hash = audit_chain_hash(prev_chain_hash, entry_hash)
-- created_at is written as UTC with microseconds (audit_time). Records appended before this migration keep format 1
-- (chain_hash over record_hash alone); a format 1 record after a format 2 record is a forgery.
ALTER TABLE audit_records ADD COLUMN format smallint NOT NULL DEFAULT 1;
ALTER TABLE audit_records ALTER COLUMN format SET DEFAULT 2;
-- What a record is about when it is not a price evaluation: the order whose state it chains.
ALTER TABLE audit_records ADD COLUMN subject text;
ALTER TABLE audit_records ALTER COLUMN snapshot_hash DROP NOT NULL;
CREATE INDEX audit_records_subject ON audit_records (subject, seq) WHERE subject IS NOT NULL;
CREATE INDEX audit_records_kind_created ON audit_records (kind, created_at);

CREATE FUNCTION audit_time(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

CREATE FUNCTION audit_entry_hash(p_seq bigint, p_id text, p_kind text, p_snapshot text, p_subject text, p_record_hash text, p_created_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT 'sha256:' || encode(sha256(convert_to(
    'audit/2' || E'\n' || p_seq::text || E'\n' || p_id || E'\n' || p_kind || E'\n' || coalesce(p_snapshot, '') || E'\n' ||
    coalesce(p_subject, '') || E'\n' || p_record_hash || E'\n' || audit_time(p_created_at), 'UTF8')), 'hex')
$$;

-- Appends one record to the chain (the caller's transaction holds the head until it commits).
CREATE FUNCTION audit_append(p_id text, p_kind text, p_snapshot text, p_subject text, p_record text, p_record_hash text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  head audit_head%ROWTYPE;
  at timestamptz := now();
  chained text;
BEGIN
  SELECT * INTO head FROM audit_head FOR UPDATE;
  chained := audit_chain_hash(head.chain_hash, audit_entry_hash(head.seq + 1, p_id, p_kind, p_snapshot, p_subject, p_record_hash, at));
  INSERT INTO audit_records (seq, id, kind, snapshot_hash, subject, record, record_hash, prev_chain_hash, chain_hash, created_at, format)
  VALUES (head.seq + 1, p_id, p_kind, p_snapshot, p_subject, p_record, p_record_hash, head.chain_hash, chained, at, 2);
  UPDATE audit_head SET seq = head.seq + 1, chain_hash = chained;
  RETURN head.seq + 1;
END
$$;

CREATE OR REPLACE FUNCTION audit_append(p_id text, p_kind text, p_snapshot text, p_record text, p_record_hash text) RETURNS bigint
LANGUAGE sql AS $$
  SELECT audit_append(p_id, p_kind, p_snapshot, NULL, p_record, p_record_hash)
$$;

-- record_quotes of 003, appending format 2 links.
CREATE OR REPLACE FUNCTION record_quotes(p_quotes jsonb) RETURNS TABLE (idx integer, created boolean, revoked boolean, id text, request_hash text, response text)
LANGUAGE plpgsql AS $$
DECLARE
  q jsonb;
  i integer := 0;
  existing quotes%ROWTYPE;
  head audit_head%ROWTYPE;
  next_seq bigint;
  next_chain text;
  chained text;
  at timestamptz := now();
BEGIN
  -- Quotes move no money: commit without waiting for the WAL flush; the next synchronous commit (an order's) flushes them.
  PERFORM set_config('synchronous_commit', 'off', true);
  PERFORM pg_advisory_xact_lock(k)
    FROM (SELECT DISTINCT hashtextextended((e->>'api_key_id') || E'\n' || (e->>'idempotency_key'), 0) AS k
          FROM jsonb_array_elements(p_quotes) e WHERE e->>'idempotency_key' IS NOT NULL ORDER BY 1) keys;
  SELECT * INTO head FROM audit_head FOR UPDATE;
  next_seq := head.seq;
  next_chain := head.chain_hash;
  FOR q IN SELECT * FROM jsonb_array_elements(p_quotes) LOOP
    -- The caller may have checked the key from a cache: a key revoked since then records nothing.
    IF NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.id = q->>'api_key_id' AND k.revoked_at IS NULL) THEN
      RETURN QUERY SELECT i, false, true, NULL::text, NULL::text, NULL::text;
      i := i + 1;
      CONTINUE;
    END IF;
    IF q->>'idempotency_key' IS NOT NULL THEN
      SELECT * INTO existing FROM quotes x WHERE x.api_key_id = q->>'api_key_id' AND x.idempotency_key = q->>'idempotency_key';
      IF FOUND THEN
        RETURN QUERY SELECT i, false, false, existing.id, existing.request_hash, existing.response;
        i := i + 1;
        CONTINUE;
      END IF;
    END IF;
    next_seq := next_seq + 1;
    chained := audit_chain_hash(next_chain, audit_entry_hash(next_seq, q->>'evaluation_id', 'quote_price', q->>'snapshot_hash', NULL, q->>'record_hash', at));
    INSERT INTO audit_records (seq, id, kind, snapshot_hash, record, record_hash, prev_chain_hash, chain_hash, created_at, format)
    VALUES (next_seq, q->>'evaluation_id', 'quote_price', q->>'snapshot_hash', q->>'record', q->>'record_hash', next_chain, chained, at, 2);
    next_chain := chained;
    INSERT INTO quotes (id, api_key_id, idempotency_key, request_hash, product_id, configuration, amount_atomic, response, evaluation_id, expires_at)
    VALUES (q->>'id', q->>'api_key_id', q->>'idempotency_key', q->>'request_hash', q->>'product_id', q->'configuration',
            (q->>'amount_atomic')::numeric, q->>'response', q->>'evaluation_id', (q->>'expires_at')::timestamptz);
    RETURN QUERY SELECT i, true, false, q->>'id', q->>'request_hash', q->>'response';
    i := i + 1;
  END LOOP;
  UPDATE audit_head SET seq = next_seq, chain_hash = next_chain;
END
$$;

-- The money in the chain: an order's state as an auditor checks it (operational columns such as the lease are left out).
CREATE FUNCTION order_audit_state(o orders) RETURNS jsonb
LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object(
    'order_id', o.id, 'api_key_id', o.api_key_id, 'request_hash', o.request_hash, 'product_id', o.product_id,
    'billing', o.billing, 'request', o.request, 'configuration', o.configuration, 'amount_atomic', o.amount_atomic::text,
    'quote_id', o.quote_id, 'evaluation_id', o.evaluation_id, 'upgrade_of', o.upgrade_of,
    'network', o.network, 'asset', o.asset, 'pay_to', o.pay_to, 'payer', o.payer, 'nonce', o.nonce,
    'valid_before', o.valid_before::text, 'payment', o.payment, 'requirements', o.requirements,
    'state', o.state, 'settlement', o.settlement, 'failure', o.failure,
    'created_at', audit_time(o.created_at), 'settled_at', audit_time(o.settled_at))
$$;

-- Every order's claim, settlement, provisioning and failure becomes a chained record of the row's state, in the
-- same transaction as the change. The trigger is deferred to the commit, so that a transaction takes the chain head
-- only after all its row changes: an order transaction never holds the head while it waits for another order row
-- (an INSERT whose unique check waits for a concurrent UPDATE of the same order would otherwise deadlock with it).
CREATE FUNCTION orders_audit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  state jsonb := order_audit_state(NEW);
  body text;
BEGIN
  IF TG_OP = 'UPDATE' AND state = order_audit_state(OLD) THEN RETURN NULL; END IF;
  body := state::text;
  PERFORM audit_append('os_' || replace(gen_random_uuid()::text, '-', ''), 'order_state', NULL, NEW.id, body,
                       'sha256:' || encode(sha256(convert_to(body, 'UTF8')), 'hex'));
  RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER orders_audit AFTER INSERT OR UPDATE ON orders DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION orders_audit();
-- The claim inserts the order before it appends the evaluation that priced it (for the same reason).
ALTER TABLE orders ALTER CONSTRAINT orders_evaluation_id_fkey DEFERRABLE INITIALLY DEFERRED;

-- Orders placed before this migration: their present state starts their chained history.
DO $$
DECLARE
  o orders;
  body text;
BEGIN
  FOR o IN SELECT * FROM orders ORDER BY created_at, id LOOP
    body := order_audit_state(o)::text;
    PERFORM audit_append('os_' || replace(gen_random_uuid()::text, '-', ''), 'order_state', NULL, o.id, body,
                         'sha256:' || encode(sha256(convert_to(body, 'UTF8')), 'hex'));
  END LOOP;
END
$$;

-- Chain heads signed with the operator key, kept so that a later rewrite of the chain before them shows.
CREATE TABLE audit_signed_heads (
  seq        bigint PRIMARY KEY,
  chain_hash text NOT NULL,
  document   text NOT NULL,
  signature  text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- At most one upgrade of a service is being paid at a time (otherwise parallel upgrades were each charged).
CREATE UNIQUE INDEX orders_one_upgrade_in_flight ON orders (upgrade_of) WHERE upgrade_of IS NOT NULL AND state IN ('settling', 'provisioning');
