-- The receive side: sources (a tenant's receiving addresses) and the inbound events
-- they admitted. The dedupe decision is the insert against inbound_events' key.

CREATE TABLE sources (
    tenant_id         text NOT NULL,
    id                text NOT NULL,
    name              text NOT NULL,
    provider          text NOT NULL,
    secret            bytea,          -- sealed with the tenant's key; NULL for `none`
    old_secret        bytea,          -- still accepted until old_secret_until
    old_secret_until  timestamptz,
    verify            jsonb NOT NULL DEFAULT '{}',   -- `hmac` options
    idempotency       jsonb,          -- NULL: the provider's stable id
    mode              text NOT NULL DEFAULT 'async' CHECK (mode IN ('async', 'sync')),
    app_id            text NOT NULL,
    event_type_path   text,
    retention_days    integer NOT NULL DEFAULT 30 CHECK (retention_days BETWEEN 1 AND 90),
    disabled          boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, app_id) REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
-- `/in/{source_id}` names no tenant: this index resolves it (the one lookup that
-- does not start from a tenant; in a sharded deployment, a small routing table).
CREATE UNIQUE INDEX sources_id ON sources (id);

-- status: 'accepted' (async, committed with its message), 'processing' (sync, leased),
-- 'completed' (sync, forwarded).
CREATE TABLE inbound_events (
    tenant_id     text NOT NULL,
    source_id     text NOT NULL,
    key           text NOT NULL,
    id            text NOT NULL,
    status        text NOT NULL CHECK (status IN ('accepted', 'processing', 'completed')),
    app_id        text NOT NULL,
    msg_id        text,
    event_type    text NOT NULL,
    content_type  text NOT NULL,
    payload       bytea NOT NULL,
    duplicates    integer NOT NULL DEFAULT 0,
    lease_until   timestamptz,
    received_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, source_id, key),
    FOREIGN KEY (tenant_id, source_id) REFERENCES sources (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX inbound_events_id ON inbound_events (tenant_id, source_id, id);
CREATE INDEX inbound_events_received ON inbound_events (received_at);

-- Forwarded messages carry the inbound key as their Idempotency-Key.
ALTER TABLE messages ADD COLUMN idempotency_key text;
