-- x402 payment-identifier: the id an agent puts in its payment payload, scoped to its API key like an Idempotency-Key.
-- The same id with the same payload returns the same order; another payload with it is refused (src/orders/order-service.ts).
-- Released (like the Idempotency-Key) when the payment was not taken, so that the agent may pay again under the same id.
ALTER TABLE orders ADD COLUMN payment_id text;
CREATE UNIQUE INDEX orders_payment_id ON orders (api_key_id, payment_id) WHERE payment_id IS NOT NULL;
