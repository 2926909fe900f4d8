-- When a failed order's authorization was last found settled for good on chain: unused past its validBefore, cancelled,
-- or spent on another transfer (src/refunds/charged-failed-orders.ts). Null: not yet known, looked at again. An order
-- failed while its payment could still land (in earlier versions) and charged all the same is refunded in full instead.
-- Not part of the order's audited state: the audit trigger (migration 058) skips an update that changes only this.
ALTER TABLE orders ADD COLUMN chain_checked_at timestamptz;
CREATE INDEX orders_failed_unchecked ON orders (updated_at) WHERE state = 'failed' AND chain_checked_at IS NULL;
