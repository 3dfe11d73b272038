-- Endpoint lanes: the due deliveries of an endpoint that cannot take them now
-- (it has its share of a worker's requests in flight, or its throttleRate says
-- wait) are parked here, in their endpoint's own queue, and taken out of the
-- shared due order (`deliveries.next_attempt_at` is NULL while parked), so one
-- endpoint's backlog never stands in front of another's deliveries. Workers serve
-- the lanes round robin, each no faster than its endpoint takes them.
--
-- A parked delivery (pending, no due time) has its row here, and a paused one (a
-- disabled tenant's) has none: that is how the two are told apart. A row whose
-- delivery has moved on (resent, recovered, erased, dropped with its partition)
-- is simply deleted when its lane is served. One row per delivery; a lane is
-- served oldest due first.
CREATE TABLE IF NOT EXISTS delivery_lanes (
    tenant_id    text NOT NULL,
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    msg_id       text NOT NULL,
    due_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, app_id, endpoint_id, msg_id)
);
CREATE INDEX IF NOT EXISTS delivery_lanes_order ON delivery_lanes (tenant_id, app_id, endpoint_id, due_at, msg_id);
