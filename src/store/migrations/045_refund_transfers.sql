-- A service paid by several wallets (its order, then extensions or upgrades paid by others) is refunded per wallet:
-- its stop refund is then 'split', paid back by one part per wallet (part_of names it), each a refund row of its own
-- with its own payer, amount and nonce, sent and proven like any refund.
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS part_of text REFERENCES refunds(id);
ALTER TABLE refunds DROP CONSTRAINT IF EXISTS refunds_status_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_status_check
  CHECK (status IN ('computing', 'pending', 'sent', 'failed', 'none', 'split'));
DROP INDEX IF EXISTS refunds_one_stop;
CREATE UNIQUE INDEX refunds_one_stop ON refunds (service_id) WHERE reason = 'stopped' AND part_of IS NULL;
CREATE INDEX IF NOT EXISTS refunds_parts ON refunds (part_of) WHERE part_of IS NOT NULL;
