-- A key may carry an expiry (keys a wallet gets over MCP with create_api_key): past it the key is refused as a revoked
-- one is, and it no longer counts among the wallet's live keys. Null: the key never expires.
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
