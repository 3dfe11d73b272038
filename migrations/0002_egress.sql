-- The egress side: applications, event types, endpoints, messages, and the outbox.
-- A message and one `deliveries` row per matching endpoint commit in one
-- transaction; workers claim due deliveries with FOR UPDATE SKIP LOCKED.

CREATE TABLE applications (
    tenant_id      text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id             text NOT NULL,
    uid            text,
    name           text NOT NULL,
    throttle_rate  integer,
    metadata       jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX applications_uid ON applications (tenant_id, uid) WHERE uid IS NOT NULL;

CREATE TABLE event_types (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name          text NOT NULL,
    description   text NOT NULL DEFAULT '',
    archived      boolean NOT NULL DEFAULT false,
    deprecated    boolean NOT NULL DEFAULT false,
    schemas       jsonb,
    feature_flag  text,
    group_name    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

CREATE TABLE endpoints (
    tenant_id          text NOT NULL,
    app_id             text NOT NULL,
    id                 text NOT NULL,
    uid                text,
    url                text NOT NULL,
    description        text NOT NULL DEFAULT '',
    version            integer NOT NULL DEFAULT 1,
    disabled           boolean NOT NULL DEFAULT false,
    event_types        text[],          -- NULL: every event type
    channels           text[],          -- NULL: every channel
    throttle_rate      integer,
    metadata           jsonb NOT NULL DEFAULT '{}',
    headers            jsonb NOT NULL DEFAULT '{}',
    secret             bytea NOT NULL,  -- sealed with the tenant's key
    old_secret         bytea,           -- still signs until old_secret_until
    old_secret_until   timestamptz,
    failing_since      timestamptz,     -- first failure since the last success
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app_id, id),
    FOREIGN KEY (tenant_id, app_id) REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX endpoints_uid ON endpoints (tenant_id, app_id, uid) WHERE uid IS NOT NULL;

CREATE TABLE messages (
    tenant_id     text NOT NULL,
    app_id        text NOT NULL,
    id            text NOT NULL,
    event_id      text,
    event_type    text NOT NULL,
    channels      text[],
    tags          text[],
    payload       bytea NOT NULL,       -- byte for byte as it will be delivered
    content_type  text NOT NULL DEFAULT 'application/json',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app_id, id),
    FOREIGN KEY (tenant_id, app_id) REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX messages_event_id ON messages (tenant_id, app_id, event_id) WHERE event_id IS NOT NULL;

-- status: 0 success, 1 pending, 2 failed, 3 sending (Svix's MessageStatus).
-- A claimed delivery has next_attempt_at pushed out by the lease: if its worker
-- dies, it simply becomes due again.
CREATE TABLE deliveries (
    tenant_id        text NOT NULL,
    app_id           text NOT NULL,
    msg_id           text NOT NULL,
    endpoint_id      text NOT NULL,
    status           smallint NOT NULL DEFAULT 1,
    attempts         integer NOT NULL DEFAULT 0,  -- in the current schedule run
    trigger          smallint NOT NULL DEFAULT 0, -- 1: a manual resend, tried once
    next_attempt_at  timestamptz,
    last_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app_id, msg_id, endpoint_id),
    FOREIGN KEY (tenant_id, app_id, msg_id) REFERENCES messages (tenant_id, app_id, id) ON DELETE CASCADE
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status IN (1, 3);
CREATE INDEX deliveries_endpoint ON deliveries (tenant_id, app_id, endpoint_id, msg_id);

-- One row per HTTP attempt. status: 0 success, 2 failed; trigger: 0 scheduled, 1 manual.
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
    PRIMARY KEY (tenant_id, app_id, id),
    FOREIGN KEY (tenant_id, app_id, msg_id) REFERENCES messages (tenant_id, app_id, id) ON DELETE CASCADE
);
CREATE INDEX attempts_msg ON attempts (tenant_id, app_id, msg_id, id);
CREATE INDEX attempts_endpoint ON attempts (tenant_id, app_id, endpoint_id, id);
