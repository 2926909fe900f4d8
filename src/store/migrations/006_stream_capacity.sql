-- Orders count the services that still hold a place on their Icecast before selling another stream.
CREATE INDEX services_holding_a_place ON services (icecast_url) WHERE status IN ('pending', 'provisioning', 'active', 'suspended');
