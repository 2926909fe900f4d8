-- The chain's height when an order was claimed: proof of its payment (the token's logs) is searched from there on.
ALTER TABLE orders ADD COLUMN claim_block numeric(78, 0);
