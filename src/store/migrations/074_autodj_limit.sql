-- A product's AutoDJ is now one of its limits (autodj: true in its catalog file), copied into each service bought from
-- it. Services bought before that carry the product's other limits only: they get the flag their product gave them.
UPDATE services SET limits = limits || '{"autodj": true}'::jsonb
 WHERE product_id = 'temporary-autodj' AND NOT (limits ? 'autodj');
