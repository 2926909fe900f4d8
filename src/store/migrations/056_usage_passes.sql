-- When the life-cycle worker of a streaming host last measured all of its live services. A pass writes a service's
-- usage row only when its usage changed (an idle service's row is not rewritten every second); this one row says how
-- fresh every live service's usage on the host is (see ServiceRecords.usage, which shows the later of the two).
CREATE TABLE usage_passes (
  host_id     text PRIMARY KEY,
  measured_at timestamptz NOT NULL
);
