-- hookgate:contract
-- `deliveries_endpoint`, which 0044 replaced, dropped once no process of the
-- previous release is left. Dropping an index of a partitioned table locks the
-- table and every partition (ACCESS EXCLUSIVE, one after another) for an
-- instant; writers queue behind the request while it waits, so each lock is
-- waited for at most a second and the whole statement at most two, and a
-- contract that times out is tried again at the workers' next look. One table
-- per contract, so no two tables' locks are taken together.
SET LOCAL lock_timeout = '1s';
SET LOCAL statement_timeout = '2s';
DROP INDEX IF EXISTS deliveries_endpoint;
