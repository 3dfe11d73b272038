-- A FIFO endpoint's progress row at rest has `next_at` = 'infinity': the runners'
-- pick walks only due rows (an index range on `next_at`), so resting rows cost
-- it nothing (crates/shared/src/store/fifo.rs). The release before this one left
-- a drained row due again a minute later; such rows (no batch held, no runner
-- holding them, nothing logged past their position) are laid to rest here, so
-- that they do not each take a turn, ahead of real work, after the upgrade.
--
-- `parked`: a row at rest because its endpoint is disabled or its tenant
-- disabled or deleted (a runner found it so), rather than because it has nothing
-- to send. A publish does not wake a parked row (a resting one it does); enabling
-- the endpoint or the tenant does. Catalog only (a constant default).
ALTER TABLE fifo_state ADD COLUMN IF NOT EXISTS parked boolean NOT NULL DEFAULT false;

-- Not a switch: the previous release's pick passes over resting rows, and its
-- fan-out wakes them (its wake is `next_at > now()`). The rows are locked first,
-- so that a publish that had locked one (the fan-out's upsert locks the row even
-- when it writes nothing) has committed before the check below, whose snapshot
-- then sees its message; a publish that comes later finds the row at rest and
-- wakes it (the same argument as `fifo::end`). They are locked in key order, the
-- order in which a publish locks a keyed endpoint's rows, so that the two cannot
-- deadlock.
SELECT 1 FROM fifo_state
WHERE batch_xid IS NULL AND (lease_until IS NULL OR lease_until < now()) AND next_at < 'infinity'
ORDER BY tenant_id, app_id, endpoint_id, key
FOR UPDATE;

UPDATE fifo_state s SET next_at = 'infinity'
WHERE s.batch_xid IS NULL AND (s.lease_until IS NULL OR s.lease_until < now()) AND s.next_at < 'infinity'
  AND NOT EXISTS (
    SELECT 1 FROM sink_log l
    WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id AND l.key = s.key
      AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq));
