-- hookgate:switch
-- Time partitioning, step 3 of 3 (the switch): inbound events, messages,
-- deliveries and attempts become tables partitioned by day on their time-ordered
-- ids (a delivery and an attempt on their message's id, so that a day's messages
-- and everything under them share one day's partitions and go together).
--
-- The existing tables are kept in place as each one's first partition, below the
-- bound 0015 chose (no row is copied; attaching them needs no scan, thanks to the
-- checks 0016 proved), or dropped if they are empty. Locks: a brief ACCESS
-- EXCLUSIVE on the four tables; every step is catalog work. The previous release
-- must not run through this (its pruners address rows by ctid, which a
-- partitioned table does not make unique): `hookgate migrate` stops before it
-- on a database in use until told `--switch` (docs/retention.md, Upgrading).
SET LOCAL lock_timeout = '10s';

-- The release that runs from here writes the key tables itself.
DROP TRIGGER hookgate_mirror_inbound_key ON inbound_events;
DROP TRIGGER hookgate_mirror_message_keys ON messages;
DROP FUNCTION hookgate_mirror_inbound_key();
DROP FUNCTION hookgate_mirror_message_keys();

-- Deliveries and attempts name their application now (0016), not their message:
-- a foreign key onto a partitioned table would stop its partitions being dropped.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_tenant_id_app_id_msg_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_tenant_id_app_id_msg_id_fkey;
-- Decided by message_event_ids and message_request_keys from here on.
DROP INDEX messages_event_id;
ALTER TABLE messages DROP COLUMN request_key;
-- The dedupe decision is inbound_keys'; the key of an event row is its id.
ALTER TABLE inbound_events DROP CONSTRAINT inbound_events_pkey;
ALTER TABLE inbound_events ADD CONSTRAINT inbound_events_legacy_pkey PRIMARY KEY USING INDEX inbound_events_id;
-- Attempts are keyed under their message, as their partitions are.
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_legacy_pkey PRIMARY KEY USING INDEX attempts_msg_key;

ALTER TABLE messages RENAME TO messages_legacy;
ALTER INDEX messages_pkey RENAME TO messages_legacy_pkey;
ALTER INDEX messages_created RENAME TO messages_legacy_created;
ALTER INDEX messages_payload_expiry RENAME TO messages_legacy_payload_expiry;
ALTER INDEX messages_event_lookup RENAME TO messages_legacy_event_lookup;
ALTER TABLE deliveries RENAME TO deliveries_legacy;
ALTER INDEX deliveries_pkey RENAME TO deliveries_legacy_pkey;
ALTER INDEX deliveries_due RENAME TO deliveries_legacy_due;
ALTER INDEX deliveries_endpoint RENAME TO deliveries_legacy_endpoint;
ALTER TABLE attempts RENAME TO attempts_legacy;
ALTER INDEX attempts_endpoint RENAME TO attempts_legacy_endpoint;
ALTER INDEX attempts_msg RENAME TO attempts_legacy_msg;
ALTER TABLE inbound_events RENAME TO inbound_events_legacy;
ALTER INDEX inbound_events_app RENAME TO inbound_events_legacy_app;
ALTER INDEX inbound_events_source_received RENAME TO inbound_events_legacy_source_received;

CREATE TABLE messages (
    tenant_id           text NOT NULL,
    app_id              text NOT NULL,
    id                  text NOT NULL,
    event_id            text,
    event_type          text NOT NULL,
    channels            text[],
    tags                text[],
    payload             bytea,                -- byte for byte as it will be delivered; NULL once expired
    content_type        text NOT NULL DEFAULT 'application/json',
    created_at          timestamptz NOT NULL DEFAULT now(),
    idempotency_key     text,
    traceparent         text,
    payload_expires_at  timestamptz,
    CONSTRAINT messages_pkey PRIMARY KEY (tenant_id, app_id, id),
    CONSTRAINT messages_app_fkey FOREIGN KEY (tenant_id, app_id)
        REFERENCES applications (tenant_id, id) ON DELETE CASCADE
) PARTITION BY RANGE (id);
CREATE INDEX messages_created ON messages (tenant_id, created_at);
CREATE INDEX messages_payload_expiry ON messages (payload_expires_at)
    WHERE payload_expires_at IS NOT NULL AND payload IS NOT NULL;
-- A message by its eventId (GET accepts either); not unique: message_event_ids is.
CREATE INDEX messages_event_lookup ON messages (tenant_id, app_id, event_id) WHERE event_id IS NOT NULL;

-- status: 0 success, 1 pending, 2 failed, 3 sending (Svix's MessageStatus).
CREATE TABLE deliveries (
    tenant_id        text NOT NULL,
    app_id           text NOT NULL,
    msg_id           text NOT NULL,
    endpoint_id      text NOT NULL,
    status           smallint NOT NULL DEFAULT 1,
    attempts         integer NOT NULL DEFAULT 0,
    trigger          smallint NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    last_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    lease_token      bigint,
    CONSTRAINT deliveries_pkey PRIMARY KEY (tenant_id, app_id, msg_id, endpoint_id),
    CONSTRAINT deliveries_app_fkey FOREIGN KEY (tenant_id, app_id)
        REFERENCES applications (tenant_id, id) ON DELETE CASCADE,
    CONSTRAINT deliveries_status_known CHECK (status IN (0, 1, 2, 3)),
    CONSTRAINT deliveries_trigger_known CHECK (trigger IN (0, 1))
) PARTITION BY RANGE (msg_id);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status IN (1, 3);
CREATE INDEX deliveries_endpoint ON deliveries (tenant_id, app_id, endpoint_id, msg_id);

CREATE TABLE attempts (
    tenant_id             text NOT NULL,
    app_id                text NOT NULL,
    id                    text NOT NULL,
    msg_id                text NOT NULL,
    endpoint_id           text NOT NULL,
    url                   text NOT NULL,
    status                smallint NOT NULL,
    trigger_type          smallint NOT NULL DEFAULT 0,
    response_status_code  smallint NOT NULL,
    response              text NOT NULL DEFAULT '',
    response_duration_ms  bigint NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT attempts_pkey PRIMARY KEY (tenant_id, app_id, msg_id, id),
    CONSTRAINT attempts_app_fkey FOREIGN KEY (tenant_id, app_id)
        REFERENCES applications (tenant_id, id) ON DELETE CASCADE,
    CONSTRAINT attempts_status_known CHECK (status IN (0, 1, 2, 3)),
    CONSTRAINT attempts_trigger_known CHECK (trigger_type IN (0, 1))
) PARTITION BY RANGE (msg_id);
CREATE INDEX attempts_endpoint ON attempts (tenant_id, app_id, endpoint_id, id);

-- status: 'accepted' (async, committed with its message), 'processing' (sync,
-- leased), 'completed' (sync, forwarded). Admitted once per key: inbound_keys.
CREATE TABLE inbound_events (
    tenant_id     text NOT NULL,
    source_id     text NOT NULL,
    key           text NOT NULL,
    id            text NOT NULL,
    status        text NOT NULL,
    app_id        text NOT NULL,
    msg_id        text,
    event_type    text NOT NULL,
    content_type  text NOT NULL,
    payload       bytea,
    duplicates    integer NOT NULL DEFAULT 0,
    lease_until   timestamptz,
    received_at   timestamptz NOT NULL DEFAULT now(),
    lease_token   bigint,
    traceparent   text,
    CONSTRAINT inbound_events_pkey PRIMARY KEY (tenant_id, source_id, id),
    CONSTRAINT inbound_events_source_fkey FOREIGN KEY (tenant_id, source_id)
        REFERENCES sources (tenant_id, id) ON DELETE CASCADE,
    CONSTRAINT inbound_events_status_check CHECK (status IN ('accepted', 'processing', 'completed'))
) PARTITION BY RANGE (id);
CREATE INDEX inbound_events_app ON inbound_events (tenant_id, app_id);
CREATE INDEX inbound_events_source_received ON inbound_events (tenant_id, source_id, received_at);

-- The old tables: the first partition of each, below the cutover, or gone if
-- empty (a new installation). Deliveries and attempts follow their messages.
DO $$
DECLARE
    below timestamptz := (SELECT c.below FROM hookgate_partition_cutover c);
    day timestamptz;
    egress boolean := EXISTS (SELECT 1 FROM messages_legacy);
    ingress boolean := EXISTS (SELECT 1 FROM inbound_events_legacy);
    family record;
BEGIN
    FOR family IN SELECT * FROM (VALUES ('messages', 'msg', egress), ('deliveries', 'msg', egress),
            ('attempts', 'msg', egress), ('inbound_events', 'evt', ingress)) AS f(tbl, prefix, keep) LOOP
        IF family.keep THEN
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)',
                family.tbl, family.tbl || '_legacy', hookgate_id_floor(family.prefix, below));
            day := below;
        ELSE
            EXECUTE format('DROP TABLE %I', family.tbl || '_legacy');
            day := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '2 days';
        END IF;
        -- A week of days ahead; the processes keep making them (store::partitions).
        WHILE day < now() + interval '8 days' LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                family.tbl || '_p' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'), family.tbl,
                hookgate_id_floor(family.prefix, day), hookgate_id_floor(family.prefix, day + interval '1 day'));
            day := day + interval '1 day';
        END LOOP;
    END LOOP;
END
$$;
