-- The webhook worker is woken only by events that queued a delivery (channel agent_audio_deliveries); SSE readers
-- keep their per-service notification. Before, every event woke the worker, which then ran its claim transaction
-- (four round trips and a planner-heavy query) even on an instance without a single endpoint: two per paid order.
-- The worker's own timer (WEBHOOK_POLL_INTERVAL_MS) still looks at the outbox, for retries and missed notifications.
CREATE OR REPLACE FUNCTION events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  queued integer;
BEGIN
  INSERT INTO webhook_deliveries (endpoint_id, event_seq)
  SELECT e.id, NEW.seq FROM webhook_endpoints e
  WHERE e.api_key_id = NEW.api_key_id AND e.deleted_at IS NULL AND e.disabled_at IS NULL
    AND (e.service_id IS NULL OR e.service_id = NEW.service_id)
    AND (e.events IS NULL OR NEW.type = ANY (e.events));
  GET DIAGNOSTICS queued = ROW_COUNT;
  PERFORM pg_notify('agent_audio_events', coalesce(NEW.service_id, ''));
  IF queued > 0 THEN
    PERFORM pg_notify('agent_audio_deliveries', '');
  END IF;
  RETURN NEW;
END $$;
