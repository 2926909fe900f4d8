-- record_quotes of 018 with less work per quote: the API keys of a batch are checked once per key (not once
-- per quote), the batch's quotes go into their table in one INSERT (not one per quote), and quotes created by the call
-- come back without their request hash and response (the caller has them; only an earlier quote's are sent back).
-- The order of work is that of 018: key checks, idempotency look-ups and the quotes' rows first, then, holding the chain
-- head, the links and one INSERT into audit_records. Records and links are exactly those of 018 (format 2, same seq
-- order, same created_at), so `audit verify`, bundles and replay are unchanged. Within one batch, a second quote with
-- the same API key and Idempotency-Key gets the first one back, as it did when the first was inserted before it.
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
  total integer := jsonb_array_length(p_quotes);
  unusable text[];
  -- Idempotency keys claimed earlier in this batch ("key id\nidempotency key") and the position that claimed each.
  claimed text[] := '{}';
  claimed_by integer[] := '{}';
  claim text;
  picked integer[] := array_fill(NULL::integer, ARRAY[total]);
  ids text[] := array_fill(NULL::text, ARRAY[total]);
  snapshots text[] := array_fill(NULL::text, ARRAY[total]);
  hashes text[] := array_fill(NULL::text, ARRAY[total]);
  -- The answer by position: created (true), an earlier quote (false, with its id/hash/response), or a revoked key (NULL).
  outcome boolean[] := array_fill(NULL::boolean, ARRAY[total]);
  found_ids text[] := array_fill(NULL::text, ARRAY[total]);
  found_hashes text[] := array_fill(NULL::text, ARRAY[total]);
  found_responses text[] := array_fill(NULL::text, ARRAY[total]);
  prevs text[];
  links text[];
  k integer;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  PERFORM pg_advisory_xact_lock(h)
    FROM (SELECT DISTINCT hashtextextended((e->>'api_key_id') || E'\n' || (e->>'idempotency_key'), 0) AS h
          FROM jsonb_array_elements(p_quotes) e WHERE e->>'idempotency_key' IS NOT NULL ORDER BY 1) keys;
  -- The caller may have checked the keys from a cache: a key revoked since then records nothing. One look-up per key.
  SELECT coalesce(array_agg(d.key_id), '{}') INTO unusable
    FROM (SELECT DISTINCT e->>'api_key_id' AS key_id FROM jsonb_array_elements(p_quotes) e) d
   WHERE NOT EXISTS (SELECT 1 FROM api_keys a WHERE a.id = d.key_id AND a.revoked_at IS NULL);
  FOR q IN SELECT * FROM jsonb_array_elements(p_quotes) LOOP
    i := i + 1;
    IF q->>'api_key_id' = ANY (unusable) THEN CONTINUE; END IF;
    IF q->>'idempotency_key' IS NOT NULL THEN
      claim := (q->>'api_key_id') || E'\n' || (q->>'idempotency_key');
      k := array_position(claimed, claim);
      IF k IS NOT NULL THEN
        outcome[i] := false;
        found_ids[i] := p_quotes -> (claimed_by[k] - 1) ->> 'id';
        found_hashes[i] := p_quotes -> (claimed_by[k] - 1) ->> 'request_hash';
        found_responses[i] := p_quotes -> (claimed_by[k] - 1) ->> 'response';
        CONTINUE;
      END IF;
      SELECT * INTO existing FROM quotes x WHERE x.api_key_id = q->>'api_key_id' AND x.idempotency_key = q->>'idempotency_key';
      IF FOUND THEN
        outcome[i] := false;
        found_ids[i] := existing.id;
        found_hashes[i] := existing.request_hash;
        found_responses[i] := existing.response;
        CONTINUE;
      END IF;
      claimed := claimed || claim;
      claimed_by := claimed_by || i;
    END IF;
    outcome[i] := true;
    n := n + 1;
    picked[n] := i - 1;
    ids[n] := q->>'evaluation_id';
    snapshots[n] := q->>'snapshot_hash';
    hashes[n] := q->>'record_hash';
  END LOOP;
  IF n > 0 THEN
    INSERT INTO quotes (id, api_key_id, idempotency_key, request_hash, product_id, configuration, amount_atomic, response, evaluation_id, expires_at)
    SELECT x.item->>'id', x.item->>'api_key_id', x.item->>'idempotency_key', x.item->>'request_hash', x.item->>'product_id', x.item->'configuration',
           (x.item->>'amount_atomic')::numeric, x.item->>'response', x.item->>'evaluation_id', (x.item->>'expires_at')::timestamptz
      FROM unnest(picked[1:n]) AS p(pos), LATERAL (SELECT p_quotes -> p.pos AS item) x;

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
  END IF;
  -- Created quotes come back without their request hash and response: the caller has them.
  RETURN QUERY SELECT (o.ord - 1)::integer, coalesce(o.outcome, false), o.outcome IS NULL, f.fid, f.fhash, f.fresponse
    FROM unnest(outcome) WITH ORDINALITY AS o(outcome, ord)
    JOIN unnest(found_ids, found_hashes, found_responses) WITH ORDINALITY AS f(fid, fhash, fresponse, ord) ON f.ord = o.ord;
END
$$;
