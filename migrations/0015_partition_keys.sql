-- Time partitioning, step 1 of 3 (expand, with 0016): what the switch in 0017
-- needs, made while the previous release keeps running on the same tables.
-- Nothing here changes what the previous release reads or writes
-- (docs/retention.md, Upgrading).
--
-- A unique index cannot span the partitions of a partitioned table, so the
-- decisions that must be unique across all time move to narrow tables of their
-- own, which stay unpartitioned: `inbound_keys` (the ingress dedupe decision),
-- `message_event_ids` (a message's `eventId`, unique per application) and
-- `message_request_keys` (the API `Idempotency-Key` that created a message).
-- Each is still decided by one INSERT … ON CONFLICT against its primary key.
SET LOCAL lock_timeout = '10s';

-- The lowest id a prefix can have at a time: the ULID of that millisecond with
-- no randomness. Partition bounds are such ids, so a row goes to the partition
-- of the time its id was made. Rust has the same function (ids::floor), tested
-- against this one.
CREATE OR REPLACE FUNCTION hookgate_id_floor(prefix text, at timestamptz) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    ms bigint := floor(extract(epoch FROM at) * 1000)::bigint;
    alphabet constant text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    body text := '';
BEGIN
    FOR i IN REVERSE 9..0 LOOP
        body := body || substr(alphabet, ((ms >> (i * 5)) & 31)::int + 1, 1);
    END LOOP;
    RETURN prefix || '_' || body || '0000000000000000';
END
$$;

CREATE TABLE IF NOT EXISTS inbound_keys (
    tenant_id    text NOT NULL,
    source_id    text NOT NULL,
    key          text NOT NULL,
    event_id     text NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, source_id, key),
    FOREIGN KEY (tenant_id, source_id) REFERENCES sources (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS inbound_keys_received ON inbound_keys (tenant_id, source_id, received_at);

CREATE TABLE IF NOT EXISTS message_event_ids (
    tenant_id   text NOT NULL,
    app_id      text NOT NULL,
    event_id    text NOT NULL,
    msg_id      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app_id, event_id),
    FOREIGN KEY (tenant_id, app_id) REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
-- The ids of a message partition's range, when that partition is dropped.
CREATE INDEX IF NOT EXISTS message_event_ids_msg ON message_event_ids (msg_id);

CREATE TABLE IF NOT EXISTS message_request_keys (
    tenant_id   text NOT NULL,
    app_id      text NOT NULL,
    key         text NOT NULL,
    msg_id      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app_id, key),
    FOREIGN KEY (tenant_id, app_id) REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS message_request_keys_created ON message_request_keys (created_at);

-- While the previous release runs, its writes are mirrored into the new tables
-- (the switch drops these triggers).
CREATE OR REPLACE FUNCTION hookgate_mirror_inbound_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO inbound_keys (tenant_id, source_id, key, event_id, received_at)
        VALUES (NEW.tenant_id, NEW.source_id, NEW.key, NEW.id, NEW.received_at) ON CONFLICT DO NOTHING;
        RETURN NEW;
    END IF;
    DELETE FROM inbound_keys WHERE tenant_id = OLD.tenant_id AND source_id = OLD.source_id AND key = OLD.key
        AND event_id = OLD.id;
    RETURN OLD;
END
$$;
DROP TRIGGER IF EXISTS hookgate_mirror_inbound_key ON inbound_events;
CREATE TRIGGER hookgate_mirror_inbound_key AFTER INSERT OR DELETE ON inbound_events
    FOR EACH ROW EXECUTE FUNCTION hookgate_mirror_inbound_key();

CREATE OR REPLACE FUNCTION hookgate_mirror_message_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM message_event_ids WHERE tenant_id = OLD.tenant_id AND app_id = OLD.app_id
            AND event_id = OLD.event_id AND msg_id = OLD.id;
        DELETE FROM message_request_keys WHERE tenant_id = OLD.tenant_id AND app_id = OLD.app_id
            AND key = OLD.request_key AND msg_id = OLD.id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        IF NEW.event_id IS NOT NULL THEN
            INSERT INTO message_event_ids (tenant_id, app_id, event_id, msg_id, created_at)
            VALUES (NEW.tenant_id, NEW.app_id, NEW.event_id, NEW.id, NEW.created_at) ON CONFLICT DO NOTHING;
        END IF;
        IF NEW.request_key IS NOT NULL THEN
            INSERT INTO message_request_keys (tenant_id, app_id, key, msg_id, created_at)
            VALUES (NEW.tenant_id, NEW.app_id, NEW.request_key, NEW.id, NEW.created_at) ON CONFLICT DO NOTHING;
        END IF;
        RETURN NEW;
    END IF;
    RETURN OLD;
END
$$;
DROP TRIGGER IF EXISTS hookgate_mirror_message_keys ON messages;
CREATE TRIGGER hookgate_mirror_message_keys AFTER INSERT OR DELETE OR UPDATE OF event_id, request_key ON messages
    FOR EACH ROW EXECUTE FUNCTION hookgate_mirror_message_keys();

-- Where the existing rows end: the tables become the first partition of their
-- partitioned successors, below this bound. A month ahead, so that the previous
-- release's rows keep meeting 0016's checks until the switch (0016, and every
-- run that waits before the switch, moves it on when it comes near). Kept in a
-- table for 0016 and 0017.
CREATE TABLE IF NOT EXISTS hookgate_partition_cutover (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    below     timestamptz NOT NULL
);
INSERT INTO hookgate_partition_cutover (below)
    VALUES (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '30 days')
    ON CONFLICT DO NOTHING;

