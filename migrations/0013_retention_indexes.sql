-- hookgate:no-transaction
-- The pruners' ranges: per tenant (or source) and time, so each batch reads only
-- rows it deletes, never the whole table. Built CONCURRENTLY: writes go on while
-- they build (see docs/operations.md, Upgrades); re-runnable after a crash.
DROP INDEX CONCURRENTLY IF EXISTS messages_created;
CREATE INDEX CONCURRENTLY messages_created ON messages (tenant_id, created_at);
DROP INDEX CONCURRENTLY IF EXISTS messages_payload_expiry;
CREATE INDEX CONCURRENTLY messages_payload_expiry ON messages (payload_expires_at)
    WHERE payload_expires_at IS NOT NULL AND payload IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS inbound_events_source_received;
CREATE INDEX CONCURRENTLY inbound_events_source_received ON inbound_events (tenant_id, source_id, received_at);
-- An application's inbound events, whichever source admitted them: its erasure.
DROP INDEX CONCURRENTLY IF EXISTS inbound_events_app;
CREATE INDEX CONCURRENTLY inbound_events_app ON inbound_events (tenant_id, app_id);
DROP INDEX CONCURRENTLY IF EXISTS inbound_events_received;
