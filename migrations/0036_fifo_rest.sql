-- hookgate:no-transaction
-- A FIFO endpoint's progress row at rest has `next_at` = 'infinity': the runners'
-- pick walks only due rows (an index range on `next_at`), so resting rows cost
-- it nothing (crates/shared/src/store/fifo.rs). The release before this one left
-- a drained row due again a minute later; such rows (no batch held, no runner
-- holding them, nothing logged past their position) are laid to rest here, so
-- that they do not each take a turn, ahead of real work, after the upgrade.
--
-- Every publish to a FIFO endpoint writes `fifo_state` (the fan-out's upsert),
-- so this runs beside the previous release's publishes without holding them
-- up: outside a transaction, in two steps that each hold little for long (a
-- runner that dies midway runs it again from the start; both steps may be).

-- Step 1, `parked`: a row at rest because its endpoint is disabled or its tenant
-- disabled or deleted (a runner found it so), rather than because it has nothing
-- to send. A publish does not wake a parked row (a resting one it does); enabling
-- the endpoint or the tenant does. Catalog only (a constant default), but under
-- an ACCESS EXCLUSIVE lock, and a lock waiting behind a long transaction on the
-- table would hold every publish queued behind it. So it waits at most a second
-- for the lock; then lets the queue through for a second and tries again, up to
-- 30 times, before failing (`hookgate migrate` is then run again).
DO $$
DECLARE
    tries int := 0;
BEGIN
    LOOP
        BEGIN
            SET LOCAL lock_timeout = '1s';
            ALTER TABLE fifo_state ADD COLUMN IF NOT EXISTS parked boolean NOT NULL DEFAULT false;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            IF tries >= 30 THEN
                RAISE EXCEPTION 'fifo_state stayed locked by other transactions through 30 tries to add a column'
                    USING ERRCODE = 'lock_not_available',
                          HINT = 'Find the long transaction on fifo_state in pg_stat_activity, then run hookgate migrate again.';
            END IF;
        END;
        PERFORM pg_sleep(1);
    END LOOP;
END
$$;

-- Step 2, laying drained rows to rest, 1,000 rows at a time in key order, each
-- batch its own transaction (a publish waits at most for one batch's locks). Not
-- a switch: the previous release's pick passes over resting rows, and its
-- fan-out wakes them (its wake is `next_at > now()`).
--
-- A batch's rows are locked first, in key order (the order in which a publish
-- locks a keyed endpoint's rows), passing over those another transaction holds
-- (SKIP LOCKED: this never waits for a publish or a runner, so it cannot
-- deadlock with them; a row passed over stays due and takes one turn, which lays
-- it to rest). Then a later statement, whose snapshot is taken after the locks,
-- checks the log: a publish that had locked a row (the fan-out's upsert locks it
-- even when it writes nothing) committed before the lock was granted, and its
-- message is seen; a publish that comes later waits for the batch's commit,
-- then finds the row at rest and wakes it (the same argument as `fifo::end`).
DO $$
DECLARE
    at_t text := '';
    at_a text := '';
    at_e text := '';
    at_k text := '';
    ts text[];
    aps text[];
    eps text[];
    ks text[];
    n int;
BEGIN
    LOOP
        SELECT array_agg(s.tenant_id ORDER BY s.tenant_id, s.app_id, s.endpoint_id, s.key),
               array_agg(s.app_id ORDER BY s.tenant_id, s.app_id, s.endpoint_id, s.key),
               array_agg(s.endpoint_id ORDER BY s.tenant_id, s.app_id, s.endpoint_id, s.key),
               array_agg(s.key ORDER BY s.tenant_id, s.app_id, s.endpoint_id, s.key),
               count(*)
        INTO ts, aps, eps, ks, n
        FROM (
            SELECT tenant_id, app_id, endpoint_id, key FROM fifo_state
            WHERE (tenant_id, app_id, endpoint_id, key) > (at_t, at_a, at_e, at_k)
              AND batch_xid IS NULL AND (lease_until IS NULL OR lease_until < now()) AND next_at < 'infinity'
            ORDER BY tenant_id, app_id, endpoint_id, key
            LIMIT 1000
            FOR UPDATE SKIP LOCKED
        ) s;
        EXIT WHEN n = 0;
        UPDATE fifo_state s SET next_at = 'infinity'
        FROM unnest(ts, aps, eps, ks) AS c(tenant_id, app_id, endpoint_id, key)
        WHERE s.tenant_id = c.tenant_id AND s.app_id = c.app_id AND s.endpoint_id = c.endpoint_id AND s.key = c.key
          AND s.batch_xid IS NULL AND (s.lease_until IS NULL OR s.lease_until < now()) AND s.next_at < 'infinity'
          AND NOT EXISTS (
            SELECT 1 FROM sink_log l
            WHERE l.tenant_id = s.tenant_id AND l.app_id = s.app_id AND l.endpoint_id = s.endpoint_id AND l.key = s.key
              AND (l.xid, l.seq) > (s.pos_xid, s.pos_seq));
        -- Go on after the highest key locked.
        at_t := ts[n];
        at_a := aps[n];
        at_e := eps[n];
        at_k := ks[n];
        COMMIT;
        EXIT WHEN n < 1000;
    END LOOP;
END
$$;
