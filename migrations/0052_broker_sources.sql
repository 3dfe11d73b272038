-- Broker sources: queues and streams Hookgate consumes into messages of the
-- send API (RabbitMQ, SQS, Redis streams), and the broker messages it could not
-- use (the dead letters). Only added: the previous release neither reads nor
-- writes them (its workers consume nothing until it is gone).
CREATE TABLE IF NOT EXISTS broker_sources (
    tenant_id      text NOT NULL,
    -- `bsrc_` and a ULID.
    id             text COLLATE "C" NOT NULL,
    name           text NOT NULL,
    -- `rabbitMq`, `sqs`, `redis`.
    kind           text NOT NULL,
    -- The application a broker message goes to when it names none (an id).
    app_id         text,
    -- The connection and its credentials, sealed with the tenant's key
    -- (`broker-source:<id>`): JSON of the kind's configuration.
    config_sealed  bytea NOT NULL,
    disabled       boolean NOT NULL DEFAULT false,
    -- The worker process consuming it, until when (renewed while it runs).
    held_by        text,
    held_until     timestamptz,
    -- The last time its consumer read from the broker without an error, and
    -- the last error it met (for the stall alert and the API).
    last_read_at   timestamptz,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- Broker messages set aside: bad JSON, no event type, an unknown application.
-- Each is acknowledged on the broker once it is here, so none blocks its queue.
CREATE TABLE IF NOT EXISTS broker_dead_letters (
    tenant_id   text NOT NULL,
    source_id   text COLLATE "C" NOT NULL,
    id          bigint GENERATED ALWAYS AS IDENTITY,
    -- The broker's id of the message (an SQS MessageId, a stream entry id, …).
    broker_id   text,
    reason      text NOT NULL,
    -- The body as received, the first 64 KiB of it, and its headers or attributes.
    body        bytea,
    headers     jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX IF NOT EXISTS broker_dead_letters_by_source ON broker_dead_letters (tenant_id, source_id, id);
CREATE INDEX IF NOT EXISTS broker_dead_letters_by_age ON broker_dead_letters (created_at);
