-- The webhook worker is woken only when a delivery is queued (channel agent_audio_deliveries); SSE readers keep their
-- per-service notification from events_fan_out. Before, every event woke the worker, which then ran its claim
-- transaction (four round trips and a planner-heavy query) even on an instance without a single endpoint: twice per
-- paid order. Identical notifications of one transaction reach listeners once. The worker's own timer
-- (WEBHOOK_POLL_INTERVAL_MS) still looks at the outbox, for retries and notifications missed while not listening.
CREATE FUNCTION webhook_deliveries_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agent_audio_deliveries', '');
  RETURN NULL;
END $$;
CREATE TRIGGER webhook_deliveries_notify AFTER INSERT ON webhook_deliveries
  FOR EACH ROW EXECUTE FUNCTION webhook_deliveries_notify();
