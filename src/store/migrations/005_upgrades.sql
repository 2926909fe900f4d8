-- An upgrade is an order for an existing service: paid like any order, applied to that service.
ALTER TABLE orders ADD COLUMN upgrade_of text REFERENCES services (id);
-- Bytes sent to listeners before the transfer allowance was last renewed (by an upgrade).
ALTER TABLE services ADD COLUMN transfer_offset_bytes bigint NOT NULL DEFAULT 0;
