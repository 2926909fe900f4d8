-- HLS session tokens and segment names carry an HMAC keyed by this secret (src/hls/signing.ts), shared by every
-- instance on this database: a token is valid only if we issued it, on any host the service moves to, after a
-- restart too; a segment's name cannot be guessed from its number, yet is the same for every listener (cacheable).
CREATE TABLE hls_signing_secret (
  id      smallint PRIMARY KEY CHECK (id = 1),
  secret  bytea NOT NULL CHECK (octet_length(secret) >= 32)
);
