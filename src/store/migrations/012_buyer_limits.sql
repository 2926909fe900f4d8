-- Orders count what one API key and one paying address hold (live services, paid orders not provisioned yet)
-- before selling them another stream: src/orders/buyer-limits.ts.
CREATE INDEX services_live_by_key ON services (api_key_id) WHERE status IN ('pending', 'provisioning', 'active', 'suspended');
CREATE INDEX orders_in_flight_by_key ON orders (api_key_id) WHERE state IN ('settling', 'provisioning');
CREATE INDEX orders_in_flight_by_payer ON orders (payer) WHERE state IN ('settling', 'provisioning');
