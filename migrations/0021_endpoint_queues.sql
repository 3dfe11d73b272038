-- Fair delivery by endpoint queues. Workers claim round robin over the endpoints
-- with deliveries waiting, each endpoint's own due rows oldest first, so the due
-- order is kept per endpoint rather than across all of them: one endpoint's
-- backlog is one index probe to the others, never a scan they wait behind. The
-- index replaces the single due-time index (the number of indexes a delivery's
-- writes maintain stays three), and the lanes of the experimental design it
-- replaces go: their parked deliveries are due again at the place they held.
CREATE INDEX deliveries_queue ON deliveries (tenant_id, app_id, endpoint_id, next_attempt_at)
    WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL;

UPDATE deliveries d SET next_attempt_at = l.due_at
FROM delivery_lanes l
WHERE d.tenant_id = l.tenant_id AND d.app_id = l.app_id AND d.msg_id = l.msg_id
  AND d.endpoint_id = l.endpoint_id AND d.status = 1 AND d.next_attempt_at IS NULL;

DROP TABLE delivery_lanes;
DROP INDEX deliveries_due;
