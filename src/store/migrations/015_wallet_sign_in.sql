-- Wallet sign-in (SIWX, CAIP-122 / EIP-4361): every challenge's nonce is issued here and consumed here once, so a
-- signed message is accepted once by whichever instance sees it first (src/identity/sign-in-nonces.ts).
CREATE TABLE wallet_sign_in_nonces (
  nonce      text PRIMARY KEY,
  uri        text NOT NULL,
  issued_at  timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at    timestamptz
);
CREATE INDEX wallet_sign_in_nonces_expiry ON wallet_sign_in_nonces (expires_at);

-- Self-service keys: the wallet a key was issued to (lower-case 0x address) and the client address that asked,
-- counted per hour to bound sign-ups (src/identity/self-service-keys.ts). Operator keys have neither.
ALTER TABLE api_keys ADD COLUMN wallet_address text, ADD COLUMN created_from_ip text;
CREATE INDEX api_keys_by_wallet ON api_keys (wallet_address, created_at) WHERE wallet_address IS NOT NULL;
CREATE INDEX api_keys_by_signup_ip ON api_keys (created_from_ip, created_at) WHERE created_from_ip IS NOT NULL;
