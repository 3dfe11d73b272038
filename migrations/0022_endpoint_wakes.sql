-- Endpoint wakes: when each endpoint next needs a worker. One narrow,
-- unpartitioned row per endpoint that has (or lately had) deliveries waiting;
-- `wake_at` is never later than the earliest time any of its waiting deliveries
-- (pending or in flight) falls due. Workers list the endpoints whose wake has
-- come, oldest first, so an endpoint waiting on a retry or with everything in
-- flight is never looked at until its time, however many there are, and the
-- listing's cost does not grow with the partitions of `deliveries`.
--
-- Every statement that makes a delivery due writes its endpoint's wake in the
-- same statement (store::wakes::lower); a worker that finds an endpoint drained
-- moves its wake later (store::wakes::raise). Expand only: the previous release
-- neither reads nor writes this table while it runs beside this one; a worker's
-- slow sweep of `deliveries_queue` wakes the endpoints it left due.
CREATE TABLE IF NOT EXISTS endpoint_wakes (
    tenant_id    text NOT NULL,
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    wake_at      timestamptz,
    CONSTRAINT endpoint_wakes_pkey PRIMARY KEY (tenant_id, app_id, endpoint_id)
);
CREATE INDEX IF NOT EXISTS endpoint_wakes_due ON endpoint_wakes (wake_at) WHERE wake_at IS NOT NULL;

INSERT INTO endpoint_wakes (tenant_id, app_id, endpoint_id, wake_at)
SELECT tenant_id, app_id, endpoint_id, min(next_attempt_at) FROM deliveries
WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL
GROUP BY tenant_id, app_id, endpoint_id
ON CONFLICT (tenant_id, app_id, endpoint_id) DO UPDATE SET wake_at = LEAST(endpoint_wakes.wake_at, EXCLUDED.wake_at);

-- What each delivery worker reports of how far behind it is (milliseconds that
-- work it could start has waited for it), read by the processes that create
-- messages to hold creation back while workers fall behind (admission control).
-- Operational state, rewritten a few times a second: unlogged, not replicated,
-- emptied by a crash, which only means "no worker is behind".
CREATE UNLOGGED TABLE IF NOT EXISTS delivery_pressure (
    worker       text PRIMARY KEY,
    pressure_ms  integer NOT NULL,
    at           timestamptz NOT NULL DEFAULT now()
);
