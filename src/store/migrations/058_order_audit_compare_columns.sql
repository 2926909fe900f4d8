-- The order-state audit trigger built the order's audited state as JSON twice per UPDATE (NEW's and OLD's) only to
-- skip updates that change no audited field (a lease, an attempt count). Compare those fields as they are instead and
-- build the JSON once, for the record it appends. The fields are order_audit_state's (migration 008); the
-- numbers and times compare as that state writes them (numeric as text, times at the microsecond they are stored in).
CREATE OR REPLACE FUNCTION orders_audit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  body text;
BEGIN
  IF TG_OP = 'UPDATE' AND (
      NEW.id, NEW.api_key_id, NEW.request_hash, NEW.product_id, NEW.billing, NEW.request, NEW.configuration,
      NEW.amount_atomic::text, NEW.quote_id, NEW.evaluation_id, NEW.upgrade_of, NEW.network, NEW.asset, NEW.pay_to,
      NEW.payer, NEW.nonce, NEW.valid_before::text, NEW.payment, NEW.requirements, NEW.state, NEW.settlement,
      NEW.failure, NEW.created_at, NEW.settled_at
    ) IS NOT DISTINCT FROM (
      OLD.id, OLD.api_key_id, OLD.request_hash, OLD.product_id, OLD.billing, OLD.request, OLD.configuration,
      OLD.amount_atomic::text, OLD.quote_id, OLD.evaluation_id, OLD.upgrade_of, OLD.network, OLD.asset, OLD.pay_to,
      OLD.payer, OLD.nonce, OLD.valid_before::text, OLD.payment, OLD.requirements, OLD.state, OLD.settlement,
      OLD.failure, OLD.created_at, OLD.settled_at
    ) THEN
    RETURN NULL;
  END IF;
  body := order_audit_state(NEW)::text;
  PERFORM audit_append('os_' || replace(gen_random_uuid()::text, '-', ''), 'order_state', NULL, NEW.id, body,
                       'sha256:' || encode(sha256(convert_to(body, 'UTF8')), 'hex'));
  RETURN NULL;
END
$$;
