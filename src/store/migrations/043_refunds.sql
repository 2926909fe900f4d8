-- Money going back out: a stopped service's unused share, or an order we could not provision, refunded in USDC.
ALTER TABLE services ADD COLUMN IF NOT EXISTS stopped_at timestamptz;
-- An extension is an order for more hours of a service (its hours in configuration.duration_hours).
ALTER TABLE orders ADD COLUMN IF NOT EXISTS extension_of text REFERENCES services(id);

ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_state_check;
ALTER TABLE orders ADD CONSTRAINT orders_state_check CHECK (state IN ('settling', 'provisioning', 'active', 'failed', 'refunded'));

-- The outbox of refunds: a row is committed with the stop (or the provisioning failure) it pays back, before anything
-- is sent. 'computing': the stop is committed, the amount not yet (the mount is cut first); 'pending': to be sent;
-- 'sent': proven on chain; 'none': nothing to send (below the minimum); 'failed': given up by an operator.
CREATE TABLE refunds (
  id                text PRIMARY KEY,
  service_id        text REFERENCES services(id),
  -- A refund for one order that was never provisioned (the service may not exist).
  order_id          text REFERENCES orders(id),
  api_key_id        text NOT NULL,
  reason            text NOT NULL CHECK (reason IN ('stopped', 'provisioning_failed')),
  status            text NOT NULL CHECK (status IN ('computing', 'pending', 'sent', 'failed', 'none')),
  -- The orders whose money this refund pays back (order, upgrades, extensions).
  order_ids         text[] NOT NULL DEFAULT '{}',
  payer             text,
  amount_atomic     numeric(30, 0),
  evaluation_id     text,
  -- keccak256 of the id: the EIP-3009 nonce of the refund's transfer; the token refuses it twice.
  nonce             text NOT NULL UNIQUE,
  from_address      text,
  from_block        bigint,
  needs_approval    boolean NOT NULL DEFAULT false,
  approved_at       timestamptz,
  approved_by       text,
  pending_reason    text,
  transaction       text,
  proof             jsonb,
  attempts          integer NOT NULL DEFAULT 0,
  next_attempt_at   timestamptz NOT NULL DEFAULT now(),
  lease_until       timestamptz,
  as_of             timestamptz NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  sent_at           timestamptz,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
-- One stop refund per service; one failure refund per order.
CREATE UNIQUE INDEX refunds_one_stop ON refunds (service_id) WHERE reason = 'stopped';
CREATE UNIQUE INDEX refunds_one_per_failed_order ON refunds (order_id) WHERE reason = 'provisioning_failed';
CREATE INDEX refunds_due ON refunds (next_attempt_at) WHERE status IN ('computing', 'pending');
CREATE INDEX refunds_sent_day ON refunds (sent_at) WHERE status = 'sent';
