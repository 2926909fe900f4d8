-- Sign-in challenges are no longer stored when issued (2,000 unauthenticated challenges in 2 s were 2,000 rows kept
-- an hour): a challenge's nonce carries its expiry and an HMAC over it, the method and the resource it was issued
-- for, keyed by the secret below (shared by every instance on this database). A nonce is stored only when a
-- correctly signed message redeems it, until it expires, so that it is accepted once (src/identity/sign-in-nonces.ts).
DROP TABLE wallet_sign_in_nonces;

CREATE TABLE wallet_sign_in_secret (
  id      smallint PRIMARY KEY CHECK (id = 1),
  secret  bytea NOT NULL CHECK (octet_length(secret) >= 32)
);

CREATE TABLE wallet_sign_in_redeemed (
  nonce       text PRIMARY KEY,
  expires_at  timestamptz NOT NULL
);
CREATE INDEX wallet_sign_in_redeemed_expiry ON wallet_sign_in_redeemed (expires_at);
