-- An extension is an order for more paid time on an existing service: paid like any order, applied to that service
-- (its hours are the order's configuration.duration_hours). The refunds work reads the same column.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS extension_of text REFERENCES services (id);
-- Set when a service was stopped (and refunded): it is never extended again. The refunds work sets it.
ALTER TABLE services ADD COLUMN IF NOT EXISTS stopped_at timestamptz;
-- At most one extension of a service is being paid at a time, as for upgrades (each is priced on the paid total).
CREATE UNIQUE INDEX IF NOT EXISTS orders_one_extension_in_flight ON orders (extension_of)
  WHERE extension_of IS NOT NULL AND state IN ('settling', 'provisioning');
