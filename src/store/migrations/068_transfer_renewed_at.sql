-- When the transfer allowance was last renewed (by an upgrade). Bytes of listener connections that ended by then belong
-- to the old allowance even when they are counted after it: for a minute the life-cycle worker raises
-- transfer_offset_bytes by those it counts late (see src/services/transfer-renewal.ts).
ALTER TABLE services ADD COLUMN transfer_renewed_at timestamptz;
