-- Recordings kept past their service's end (the audio-storage-api product): kept_until is when a recording of an
-- ended service is deleted; null, it ends with its service. A retention order names the service whose recordings it
-- keeps in retention_of (its recording ids and bytes are in its configuration); one is in flight per service at once.
ALTER TABLE recordings ADD COLUMN kept_until timestamptz;
ALTER TABLE orders ADD COLUMN retention_of text REFERENCES services (id);
CREATE UNIQUE INDEX orders_one_retention_in_flight ON orders (retention_of)
  WHERE retention_of IS NOT NULL AND state IN ('settling', 'provisioning');
