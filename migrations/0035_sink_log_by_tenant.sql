-- hookgate:no-transaction
-- The FIFO and polling endpoints' log is kept as long as each tenant's message
-- retention (its own, or the operator's default), so it is pruned tenant by
-- tenant, oldest first. Built CONCURRENTLY: every publish statement writes
-- (or may write) this table, and must not wait for the build; re-runnable
-- after a crash.
DROP INDEX CONCURRENTLY IF EXISTS sink_log_tenant_created;
CREATE INDEX CONCURRENTLY sink_log_tenant_created ON sink_log (tenant_id, created_at);
DROP INDEX CONCURRENTLY IF EXISTS sink_log_created;
