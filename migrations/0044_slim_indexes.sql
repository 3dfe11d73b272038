-- hookgate:no-transaction
-- Narrower secondary indexes on the hot tables (expand; the contracts 0046 and
-- 0047 drop the wide ones).
--
-- `deliveries_endpoint` (tenant, app, endpoint, msg) becomes (tenant, endpoint,
-- msg): the endpoint names its application, and every query that reads by an
-- endpoint names it; ~31 bytes less per entry, on disk and in the WAL, written
-- twice per delivery (when it is made, and with its result, which is not a HOT
-- update). The tenant stays first: endpoint ids are kept by an environment
-- import, so two tenants may hold the same one, and a tenant's reads must never
-- walk another tenant's entries.
--
-- `inbound_keys_received` (tenant, source, received_at) becomes (source,
-- received_at): source ids are only ever generated, so unique across tenants;
-- ~31 bytes less for each admitted event's dedupe key. The queries still
-- compare the tenant on the row.
--
-- The runner builds an index on a partitioned table partition by partition
-- (`CREATE INDEX CONCURRENTLY` on each, attached to the parent's), without
-- blocking writes; the previous release's queries are served by either index.
DROP INDEX CONCURRENTLY IF EXISTS inbound_keys_by_source;
CREATE INDEX CONCURRENTLY inbound_keys_by_source ON inbound_keys (source_id, received_at);
CREATE INDEX CONCURRENTLY deliveries_by_endpoint ON deliveries (tenant_id, endpoint_id, msg_id);
