-- A quote's answer is stored only when it has an Idempotency-Key, to answer a repeat of that key; a quote without one
-- is never answered again (its evidence is its audit record). record_quotes stores NULL for a quote sent without one.
ALTER TABLE quotes ALTER COLUMN response DROP NOT NULL;
