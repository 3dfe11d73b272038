-- hookgate:contract
-- Fewer checks per admitted event and per message: the hot tables' foreign keys
-- go, and an index no query needs.
--
-- Each foreign key below was checked once per inserted row (a lookup of the
-- parent and a lock on it, logged): four per admitted event, three per API
-- message with its delivery and attempt. What they held is held another way by
-- this release (and only by it, hence a contract: the previous release relies
-- on their cascades):
-- - no orphan is written: every statement that inserts into these tables locks
--   the parent rows it writes under once (`FOR KEY SHARE`, one lock per
--   statement and parent, not one per row), and writes nothing under a parent
--   that is gone (a tidy test names the statements);
-- - removal follows the parent: deleting a source deletes its dedupe keys and
--   events, and erasing an application its messages, deliveries, attempts and
--   inbound events, each in a statement after the parent's deletion (whose wait
--   for the writers' locks makes every row they wrote visible to it).
--
-- `inbound_events_source_received` served the pruning of a source's events by
-- age and the oldest event's age; both read the primary key now (ids are
-- ordered by time, and a bound on the id also skips whole partitions).
-- Each drop locks its table and every partition for an instant; writers queue
-- behind the request while it waits, so each lock is waited for at most a
-- second and each statement at most two, and a contract that times out is
-- tried again at the workers' next look.
SET LOCAL lock_timeout = '1s';
SET LOCAL statement_timeout = '2s';
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_app_fkey;
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_app_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_app_fkey;
ALTER TABLE inbound_events DROP CONSTRAINT IF EXISTS inbound_events_source_fkey;
ALTER TABLE inbound_keys DROP CONSTRAINT IF EXISTS inbound_keys_tenant_id_source_id_fkey;
DROP INDEX IF EXISTS inbound_events_source_received;
