-- The capacity reserve reads a wallet's paid history (src/orders/paid-history.ts): its delivered orders by payment
-- time, and the refunds sent back to it (refunds name the payer as its Transfer log does, in mixed case).
CREATE INDEX IF NOT EXISTS orders_paid_by_payer ON orders (payer, settled_at) WHERE state = 'active';
CREATE INDEX IF NOT EXISTS orders_active_by_key ON orders (api_key_id) WHERE state = 'active';
CREATE INDEX IF NOT EXISTS refunds_by_payer ON refunds (lower(payer)) WHERE status IN ('pending', 'sent');
