CREATE TABLE api_keys (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  secret_hash bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);

-- Catalog + rules versions, content-addressed, so any past evaluation can be replayed on exactly what it ran on.
CREATE TABLE snapshots (
  hash       text PRIMARY KEY,
  files      jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Hash-chained evaluation records: chain_hash = sha256(prev_chain_hash || '\n' || record_hash).
CREATE TABLE audit_records (
  seq             bigint PRIMARY KEY,
  id              text NOT NULL UNIQUE,
  kind            text NOT NULL,
  snapshot_hash   text NOT NULL REFERENCES snapshots (hash),
  record          text NOT NULL,
  record_hash     text NOT NULL,
  prev_chain_hash text NOT NULL,
  chain_hash      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_head (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  seq        bigint NOT NULL,
  chain_hash text NOT NULL
);
INSERT INTO audit_head (seq, chain_hash) VALUES (0, 'sha256:' || repeat('0', 64));

CREATE FUNCTION audit_chain_hash(prev text, record_hash text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT 'sha256:' || encode(sha256(convert_to(prev || E'\n' || record_hash, 'UTF8')), 'hex')
$$;

CREATE FUNCTION audit_append(p_id text, p_kind text, p_snapshot text, p_record text, p_record_hash text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  head audit_head%ROWTYPE;
BEGIN
  SELECT * INTO head FROM audit_head FOR UPDATE;
  INSERT INTO audit_records (seq, id, kind, snapshot_hash, record, record_hash, prev_chain_hash, chain_hash)
  VALUES (head.seq + 1, p_id, p_kind, p_snapshot, p_record, p_record_hash, head.chain_hash, audit_chain_hash(head.chain_hash, p_record_hash));
  UPDATE audit_head SET seq = head.seq + 1, chain_hash = audit_chain_hash(head.chain_hash, p_record_hash);
  RETURN head.seq + 1;
END
$$;

CREATE TABLE quotes (
  id              text PRIMARY KEY,
  api_key_id      text NOT NULL REFERENCES api_keys (id),
  idempotency_key text,
  request_hash    text NOT NULL,
  product_id      text NOT NULL,
  configuration   jsonb NOT NULL,
  amount_atomic   numeric(78, 0) NOT NULL,
  response        text NOT NULL,
  evaluation_id   text NOT NULL REFERENCES audit_records (id),
  expires_at      timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (api_key_id, idempotency_key)
);

-- One round trip per quote: claim the idempotency key, append the audit record, store the quote.
-- Quotes commit asynchronously (they move no money); any later synchronous commit, such as an order's, flushes them too.
CREATE FUNCTION record_quote(
  p_id text, p_api_key_id text, p_idempotency_key text, p_request_hash text, p_product_id text, p_configuration jsonb,
  p_amount_atomic numeric, p_response text, p_expires_at timestamptz,
  p_evaluation_id text, p_snapshot text, p_record text, p_record_hash text
) RETURNS TABLE (created boolean, id text, request_hash text, response text)
LANGUAGE plpgsql AS $$
DECLARE
  existing quotes%ROWTYPE;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  IF p_idempotency_key IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_api_key_id || E'\n' || p_idempotency_key, 0));
    SELECT * INTO existing FROM quotes q WHERE q.api_key_id = p_api_key_id AND q.idempotency_key = p_idempotency_key;
    IF FOUND THEN
      RETURN QUERY SELECT false, existing.id, existing.request_hash, existing.response;
      RETURN;
    END IF;
  END IF;
  PERFORM audit_append(p_evaluation_id, 'quote_price', p_snapshot, p_record, p_record_hash);
  INSERT INTO quotes (id, api_key_id, idempotency_key, request_hash, product_id, configuration, amount_atomic, response, evaluation_id, expires_at)
  VALUES (p_id, p_api_key_id, p_idempotency_key, p_request_hash, p_product_id, p_configuration, p_amount_atomic, p_response, p_evaluation_id, p_expires_at);
  RETURN QUERY SELECT true, p_id, p_request_hash, p_response;
END
$$;
