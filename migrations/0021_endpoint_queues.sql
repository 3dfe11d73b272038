-- Fair delivery by endpoint queues. Workers claim round robin over the endpoints
-- with deliveries waiting, each endpoint's own due rows oldest first, so the due
-- order is kept per endpoint rather than across all of them: one endpoint's
-- backlog is one index probe to the others, never a scan they wait behind. The
-- lanes of the experimental design this replaces are emptied: their parked
-- deliveries are due again at the place they held.
--
-- Expand only: the previous release still claims through `deliveries_due` and
-- names `delivery_lanes` in its queries while it runs beside this one, so both
-- stay until a later release drops them (this release uses neither).
CREATE INDEX IF NOT EXISTS deliveries_queue ON deliveries (tenant_id, app_id, endpoint_id, next_attempt_at)
    WHERE status IN (1, 3) AND next_attempt_at IS NOT NULL;

WITH parked AS (
    DELETE FROM delivery_lanes RETURNING tenant_id, app_id, endpoint_id, msg_id, due_at
)
UPDATE deliveries d SET next_attempt_at = p.due_at
FROM parked p
WHERE d.tenant_id = p.tenant_id AND d.app_id = p.app_id AND d.msg_id = p.msg_id
  AND d.endpoint_id = p.endpoint_id AND d.status = 1 AND d.next_attempt_at IS NULL;
