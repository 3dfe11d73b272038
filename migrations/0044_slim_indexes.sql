-- hookgate:no-transaction
-- Narrower secondary indexes on the hot tables (expand; 0046 drops the wide ones).
--
-- Each of these led with the tenant (and the application) before an id that is
-- unique on its own (ids are generated, ULID-based), which the queries they
-- serve always name. Without them an entry is ~31 bytes smaller per id left out,
-- on disk and in the WAL: ~65 for each delivery's (written twice: when it is
-- made, and with its result, which is not a HOT update), ~31 for each admitted
-- event's and each dedupe key's. The queries still compare the tenant and
-- application on the row, so isolation does not rest on the index.
--
-- `attempts_endpoint` keeps its width: an application's attempt statistics find
-- the endpoints it has attempts for (deleted ones included) by a skip scan of
-- its (tenant, app, endpoint) prefix.
--
-- The runner builds an index on a partitioned table partition by partition
-- (`CREATE INDEX CONCURRENTLY` on each, attached to the parent's), without
-- blocking writes; the previous release's queries are served by either index.
DROP INDEX CONCURRENTLY IF EXISTS inbound_keys_by_source;
CREATE INDEX CONCURRENTLY inbound_keys_by_source ON inbound_keys (source_id, received_at);
CREATE INDEX CONCURRENTLY deliveries_by_endpoint ON deliveries (endpoint_id, msg_id);
CREATE INDEX CONCURRENTLY inbound_events_by_app ON inbound_events (app_id);
