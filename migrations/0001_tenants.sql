-- Tenants, their API keys, and the Idempotency-Key records of Hookgate's own API.
-- Every table's key starts with the tenant id, so Postgres can be sharded by tenant.

CREATE TABLE tenants (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    uid         text,
    disabled    boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE UNIQUE INDEX tenants_uid_live ON tenants (uid) WHERE uid IS NOT NULL AND deleted_at IS NULL;

-- Only a peppered hash of each key is stored; the key itself is shown once.
CREATE TABLE api_keys (
    tenant_id   text NOT NULL REFERENCES tenants (id),
    id          text NOT NULL,
    key_hash    bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX api_keys_hash ON api_keys (tenant_id, key_hash);

-- `tenant_id` is the credential's scope: a tenant id, or 'operator' for /admin.
CREATE TABLE idempotency_keys (
    tenant_id    text NOT NULL,
    key          text NOT NULL,
    fingerprint  bytea NOT NULL,
    state        text NOT NULL CHECK (state IN ('running', 'done')),
    status       smallint,
    headers      jsonb,
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
