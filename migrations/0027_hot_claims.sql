-- hookgate:switch
-- A claim writes only unindexed columns, so Postgres can make it a HOT update
-- (a new row version on the same page, no index entries): the lease moves from
-- `status = 3` and `next_attempt_at` (both indexed) to `leased_until`, beside
-- the fencing token. A delivery in flight is now pending (`status = 1`) with a
-- `leased_until` still to come; the API reports it as sending (3) as before.
-- `deliveries_due`, the due-time index of releases before 0021, goes: this
-- release claims through `deliveries_queue` and the endpoint wakes.
--
-- A switch: a process of the previous release would claim by `status = 3` and
-- `next_attempt_at`, and read a delivery this release leases as due, sending it
-- twice at once. `hookgate migrate` stops before it on a database in use until
-- told `--switch`, once every process of the previous release is stopped
-- (catalog work, and one update of the deliveries in flight at that moment).
SET LOCAL lock_timeout = '10s';
ALTER TABLE deliveries ADD COLUMN leased_until timestamptz;
-- In flight when the previous release stopped: due again when their lease ends,
-- as they would have been, and shown as sending until then (their token kept).
UPDATE deliveries SET status = 1, leased_until = next_attempt_at WHERE status = 3;
DROP INDEX IF EXISTS deliveries_due;

-- Room on each page for a claim's new row version (a HOT update needs it on the
-- same page): partitions made from now on are made so too (store::partitions).
DO $$
DECLARE p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'deliveries'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (fillfactor = 70)', p);
    END LOOP;
END $$;
