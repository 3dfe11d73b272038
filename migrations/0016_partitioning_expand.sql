-- hookgate:no-transaction
-- Time partitioning, step 2 of 3 (expand): the backfill of the key tables and
-- the indexes, foreign keys and checks the partitioned tables need, each built
-- beside the previous release's reads and writes (locks: docs/retention.md,
-- Upgrading). Re-runnable from the start after a crash.
SET lock_timeout = '10s';

-- The backfill, in batches that commit as they go, walking each table by its
-- key. FOR KEY SHARE holds a row the batch copies until the batch commits, so a
-- row deleted meanwhile is either skipped or deleted after the copy (and its
-- trigger then deletes the copied key): no key outlives its row.
DO $$
DECLARE
    t text := '';
    s text := '';
    k text := '';
BEGIN
    LOOP
        WITH batch AS (
            SELECT tenant_id, source_id, key, id, received_at FROM inbound_events
            WHERE (tenant_id, source_id, key) > (t, s, k)
            ORDER BY tenant_id, source_id, key LIMIT 5000 FOR KEY SHARE
        ), ins AS (
            INSERT INTO inbound_keys (tenant_id, source_id, key, event_id, received_at)
            SELECT tenant_id, source_id, key, id, received_at FROM batch ON CONFLICT DO NOTHING
        )
        SELECT b.tenant_id, b.source_id, b.key INTO t, s, k FROM batch b
        ORDER BY b.tenant_id DESC, b.source_id DESC, b.key DESC LIMIT 1;
        EXIT WHEN NOT FOUND;
        COMMIT;
    END LOOP;
END
$$;

DO $$
DECLARE
    t text := '';
    a text := '';
    m text := '';
BEGIN
    LOOP
        WITH batch AS (
            SELECT tenant_id, app_id, id, event_id, request_key, created_at FROM messages
            WHERE (tenant_id, app_id, id) > (t, a, m)
            ORDER BY tenant_id, app_id, id LIMIT 5000 FOR KEY SHARE
        ), ev AS (
            INSERT INTO message_event_ids (tenant_id, app_id, event_id, msg_id, created_at)
            SELECT tenant_id, app_id, event_id, id, created_at FROM batch WHERE event_id IS NOT NULL
            ON CONFLICT DO NOTHING
        ), rq AS (
            INSERT INTO message_request_keys (tenant_id, app_id, key, msg_id, created_at)
            SELECT tenant_id, app_id, request_key, id, created_at FROM batch WHERE request_key IS NOT NULL
            ON CONFLICT DO NOTHING
        )
        SELECT b.tenant_id, b.app_id, b.id INTO t, a, m FROM batch b
        ORDER BY b.tenant_id DESC, b.app_id DESC, b.id DESC LIMIT 1;
        EXIT WHEN NOT FOUND;
        COMMIT;
    END LOOP;
END
$$;

-- The indexes the partitioned tables will have that the existing ones lack, built
-- without blocking writes, so that attaching them finds every index in place.
DROP INDEX CONCURRENTLY IF EXISTS messages_event_lookup;
CREATE INDEX CONCURRENTLY messages_event_lookup ON messages (tenant_id, app_id, event_id) WHERE event_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS attempts_msg_key;
CREATE UNIQUE INDEX CONCURRENTLY attempts_msg_key ON attempts (tenant_id, app_id, msg_id, id);

-- Deliveries and attempts go with their application (the partitioned tables
-- cannot keep a foreign key to a partitioned messages table whose partitions are
-- dropped). NOT VALID then VALIDATE: the scan runs beside writes.
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_app_fkey;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_app_fkey FOREIGN KEY (tenant_id, app_id)
    REFERENCES applications (tenant_id, id) ON DELETE CASCADE NOT VALID;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_app_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_app_fkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_app_fkey FOREIGN KEY (tenant_id, app_id)
    REFERENCES applications (tenant_id, id) ON DELETE CASCADE NOT VALID;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_app_fkey;

-- The bound as a check each table proves once (the scan runs beside writes), so
-- that attaching it as a partition needs no scan under a lock. Adding a NOT VALID
-- check takes a brief exclusive lock; VALIDATE only one that lets writes go on.
DO $$
DECLARE
    below timestamptz;
BEGIN
    -- Run late (a paused rollout, a retry), the bound is moved on: the previous
    -- release's new rows must keep meeting the checks for two weeks at least.
    UPDATE hookgate_partition_cutover c
        SET below = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '30 days'
        WHERE c.below < now() + interval '14 days';
    below := (SELECT c.below FROM hookgate_partition_cutover c);
    EXECUTE 'ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_below_cutover';
    EXECUTE format('ALTER TABLE messages ADD CONSTRAINT messages_below_cutover CHECK (id < %L) NOT VALID',
        hookgate_id_floor('msg', below));
    EXECUTE 'ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_below_cutover';
    EXECUTE format('ALTER TABLE deliveries ADD CONSTRAINT deliveries_below_cutover CHECK (msg_id < %L) NOT VALID',
        hookgate_id_floor('msg', below));
    EXECUTE 'ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_below_cutover';
    EXECUTE format('ALTER TABLE attempts ADD CONSTRAINT attempts_below_cutover CHECK (msg_id < %L) NOT VALID',
        hookgate_id_floor('msg', below));
    EXECUTE 'ALTER TABLE inbound_events DROP CONSTRAINT IF EXISTS inbound_events_below_cutover';
    EXECUTE format('ALTER TABLE inbound_events ADD CONSTRAINT inbound_events_below_cutover CHECK (id < %L) NOT VALID',
        hookgate_id_floor('evt', below));
END
$$;
ALTER TABLE messages VALIDATE CONSTRAINT messages_below_cutover;
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_below_cutover;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_below_cutover;
ALTER TABLE inbound_events VALIDATE CONSTRAINT inbound_events_below_cutover;
