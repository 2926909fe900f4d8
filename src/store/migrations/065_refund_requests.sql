-- Refund requests in the form of x402's proposed refund extension (POST /x402/refund): one row per idempotency key,
-- with a digest of the signed request so that the same key answers the same request only. An accepted request names
-- the stop refund it was answered with (its state is read from the refund each time: pending turns into executed); a
-- denied one keeps its denial, answered again on a replay.
CREATE TABLE refund_requests (
  idempotency_key text PRIMARY KEY,
  request_digest  text NOT NULL,
  payer           text,
  order_id        text REFERENCES orders(id),
  service_id      text REFERENCES services(id),
  refund_id       text REFERENCES refunds(id),
  amount_atomic   numeric(78, 0) NOT NULL,
  denial_reason   text,
  denial_message  text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CHECK ((refund_id IS NULL) = (denial_reason IS NOT NULL))
);
-- A refund request names the payment by its settlement transaction.
CREATE INDEX orders_by_settlement_transaction ON orders (lower(settlement ->> 'transaction'));
