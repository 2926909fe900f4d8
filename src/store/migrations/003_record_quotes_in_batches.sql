-- Quotes are recorded in batches: one call, one chain-head lock and one head update for many quotes.
-- Idempotency keys are locked first, in a fixed order, so concurrent batches cannot deadlock.
CREATE FUNCTION record_quotes(p_quotes jsonb) RETURNS TABLE (idx integer, created boolean, revoked boolean, id text, request_hash text, response text)
LANGUAGE plpgsql AS $$
DECLARE
  q jsonb;
  i integer := 0;
  existing quotes%ROWTYPE;
  head audit_head%ROWTYPE;
  next_seq bigint;
  next_chain text;
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
    INSERT INTO audit_records (seq, id, kind, snapshot_hash, record, record_hash, prev_chain_hash, chain_hash)
    VALUES (next_seq, q->>'evaluation_id', 'quote_price', q->>'snapshot_hash', q->>'record', q->>'record_hash', next_chain,
            audit_chain_hash(next_chain, q->>'record_hash'));
    next_chain := audit_chain_hash(next_chain, q->>'record_hash');
    INSERT INTO quotes (id, api_key_id, idempotency_key, request_hash, product_id, configuration, amount_atomic, response, evaluation_id, expires_at)
    VALUES (q->>'id', q->>'api_key_id', q->>'idempotency_key', q->>'request_hash', q->>'product_id', q->'configuration',
            (q->>'amount_atomic')::numeric, q->>'response', q->>'evaluation_id', (q->>'expires_at')::timestamptz);
    RETURN QUERY SELECT i, true, false, q->>'id', q->>'request_hash', q->>'response';
    i := i + 1;
  END LOOP;
  UPDATE audit_head SET seq = next_seq, chain_hash = next_chain;
END
$$;

DROP FUNCTION record_quote(text, text, text, text, text, jsonb, numeric, text, timestamptz, text, text, text, text);
