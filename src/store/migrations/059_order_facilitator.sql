-- The facilitator an order's settlement was sent to (one of X402_FACILITATOR_URL; null: none yet, or an in-process
-- one). A settlement whose outcome is unknown there is only ever sent again to it, until the chain tells.
-- Not part of the order's audited state: the audit trigger (migration 058) skips an update that changes only this.
ALTER TABLE orders ADD COLUMN facilitator text;
