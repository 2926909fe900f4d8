-- record_quotes of 008 with a shorter hold of the chain head: the head row is the one row every quote and
-- order of every instance locks in turn, so only what needs the previous link runs while it is held. Key checks,
-- idempotency look-ups and the quotes' own rows come first, without the head; then, holding it, each record's link is
-- computed and all records of the batch go into audit_records in one INSERT. Links and records are exactly those of
-- 008 (format 2, same seq order, same created_at), so `audit verify`, bundles and replay are unchanged.
-- The quotes' reference to their evaluation record is checked at commit, as the orders' one is since 008.
ALTER TABLE quotes ALTER CONSTRAINT quotes_evaluation_id_fkey DEFERRABLE INITIALLY DEFERRED;

CREATE OR REPLACE FUNCTION record_quotes(p_quotes jsonb) RETURNS TABLE (idx integer, created boolean, revoked boolean, id text, request_hash text, response text)
LANGUAGE plpgsql AS $$
DECLARE
  q jsonb;
  i integer := 0;
  existing quotes%ROWTYPE;
  head audit_head%ROWTYPE;
  at timestamptz := now();
  chained text;
  n integer := 0;
  -- The new records by position in p_quotes (their text is read from there once, by the INSERT); arrays are filled by
  -- element, as appending copies the whole array each time.
  total integer := jsonb_array_length(p_quotes);
  picked integer[] := array_fill(NULL::integer, ARRAY[total]);
  ids text[] := array_fill(NULL::text, ARRAY[total]);
  snapshots text[] := array_fill(NULL::text, ARRAY[total]);
  hashes text[] := array_fill(NULL::text, ARRAY[total]);
  prevs text[];
  links text[];
BEGIN
  -- Quotes move no money: commit without waiting for the WAL flush; the next synchronous commit (an order's) flushes them.
  PERFORM set_config('synchronous_commit', 'off', true);
  PERFORM pg_advisory_xact_lock(k)
    FROM (SELECT DISTINCT hashtextextended((e->>'api_key_id') || E'\n' || (e->>'idempotency_key'), 0) AS k
          FROM jsonb_array_elements(p_quotes) e WHERE e->>'idempotency_key' IS NOT NULL ORDER BY 1) keys;
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
    INSERT INTO quotes (id, api_key_id, idempotency_key, request_hash, product_id, configuration, amount_atomic, response, evaluation_id, expires_at)
    VALUES (q->>'id', q->>'api_key_id', q->>'idempotency_key', q->>'request_hash', q->>'product_id', q->'configuration',
            (q->>'amount_atomic')::numeric, q->>'response', q->>'evaluation_id', (q->>'expires_at')::timestamptz);
    n := n + 1;
    picked[n] := i;
    ids[n] := q->>'evaluation_id';
    snapshots[n] := q->>'snapshot_hash';
    hashes[n] := q->>'record_hash';
    RETURN QUERY SELECT i, true, false, q->>'id', q->>'request_hash', q->>'response';
    i := i + 1;
  END LOOP;
  IF n = 0 THEN RETURN; END IF;
  prevs := array_fill(NULL::text, ARRAY[n]);
  links := array_fill(NULL::text, ARRAY[n]);

  SELECT * INTO head FROM audit_head FOR UPDATE;
  chained := head.chain_hash;
  FOR j IN 1..n LOOP
    prevs[j] := chained;
    chained := audit_chain_hash(chained, audit_entry_hash(head.seq + j, ids[j], 'quote_price', snapshots[j], NULL, hashes[j], at));
    links[j] := chained;
  END LOOP;
  INSERT INTO audit_records (seq, id, kind, snapshot_hash, record, record_hash, prev_chain_hash, chain_hash, created_at, format)
  SELECT head.seq + r.j, r.id, 'quote_price', r.snapshot, p_quotes -> r.pos ->> 'record', r.hash, r.prev, r.link, at, 2
  FROM unnest(picked[1:n], ids[1:n], snapshots[1:n], hashes[1:n], prevs, links) WITH ORDINALITY AS r(pos, id, snapshot, hash, prev, link, j);
  UPDATE audit_head SET seq = head.seq + n, chain_hash = chained;
END
$$;
