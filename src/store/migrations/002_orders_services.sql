-- An order is a state machine, committed before each external side effect:
-- settling (payment verified, key claimed) → provisioning (settled on chain) → active | failed.
CREATE TABLE orders (
  id               text PRIMARY KEY,
  api_key_id       text NOT NULL REFERENCES api_keys (id),
  -- Set to NULL (kept in released_idempotency_key) when a payment failed without charging, so the agent can retry with the same key.
  idempotency_key  text,
  released_idempotency_key text,
  request_hash     text NOT NULL,
  product_id       text NOT NULL,
  billing          text NOT NULL,
  request          jsonb NOT NULL,
  configuration    jsonb NOT NULL,
  amount_atomic    numeric(78, 0) NOT NULL,
  quote_id         text,
  evaluation_id    text REFERENCES audit_records (id),
  network          text NOT NULL,
  asset            text NOT NULL,
  pay_to           text NOT NULL,
  payer            text NOT NULL,
  nonce            text NOT NULL,
  valid_before     numeric(78, 0) NOT NULL,
  payment          jsonb NOT NULL,
  requirements     jsonb NOT NULL,
  state            text NOT NULL CHECK (state IN ('settling', 'provisioning', 'active', 'failed')),
  settlement       jsonb,
  failure          text,
  lease_until      timestamptz,
  attempts         integer NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  settled_at       timestamptz,
  UNIQUE (api_key_id, idempotency_key),
  -- One signed payment authorization pays for one order only.
  UNIQUE (payer, nonce)
);
CREATE INDEX orders_pending ON orders (lease_until) WHERE state IN ('settling', 'provisioning');

CREATE TABLE services (
  id              text PRIMARY KEY,
  order_id        text NOT NULL UNIQUE REFERENCES orders (id),
  api_key_id      text NOT NULL REFERENCES api_keys (id),
  product_id      text NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'provisioning', 'active', 'failed', 'suspended', 'expired')),
  mount           text NOT NULL UNIQUE,
  source_user     text NOT NULL,
  source_password text NOT NULL,
  limits          jsonb NOT NULL,
  expires_at      timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Listeners admitted by Icecast's listener_add callback, removed by listener_remove (and by reconciliation).
CREATE TABLE listeners (
  service_id   text NOT NULL REFERENCES services (id),
  client_id    text NOT NULL,
  ip           text,
  connected_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (service_id, client_id)
);
