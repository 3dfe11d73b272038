-- When an endpoint's latest successful attempt was made, as the worker saw it end
-- (never later than Postgres's clock), or when it was last enabled again.
-- Endpoint health goes by when attempts were made, and results can be recorded
-- out of order (a batch held up by a lock, a stall, a claim whose lease ran out):
-- a failure made before the latest success must not begin a streak again.
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS last_success_at timestamptz;
