-- hookgate:no-transaction
-- The workers' scan for endpoints failing long enough (alerts) reads only those
-- failing: a partial index, which an endpoint's row changes only when a failing
-- spell begins or ends. Built without blocking the previous release's writes to
-- endpoints; a build that failed leaves an invalid index, dropped first on the
-- next run.
DROP INDEX CONCURRENTLY IF EXISTS endpoints_failing;
CREATE INDEX CONCURRENTLY endpoints_failing ON endpoints (failing_since) WHERE failing_since IS NOT NULL AND NOT disabled;
