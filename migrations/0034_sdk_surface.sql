-- The rest of the SDK's surface: tasks of an application or a tenant (content
-- purges, usage statistics), revoked app-portal tokens, and application
-- integrations.

-- Tasks beside endpoint replays: 3 application.purge_content (stepped by the
-- workers like a replay), 4 application.stats and 5 event-type.aggregate
-- (answered when asked and recorded finished, their result in `data`).
ALTER TABLE background_tasks ALTER COLUMN app_id DROP NOT NULL;
ALTER TABLE background_tasks ALTER COLUMN endpoint_id DROP NOT NULL;
ALTER TABLE background_tasks ADD COLUMN IF NOT EXISTS data jsonb;
ALTER TABLE background_tasks DROP CONSTRAINT IF EXISTS background_tasks_kind_known;
ALTER TABLE background_tasks ADD CONSTRAINT background_tasks_kind_known CHECK (kind IN (0, 1, 2, 3, 4, 5));
ALTER TABLE background_tasks DROP CONSTRAINT IF EXISTS background_tasks_endpoint_named;
ALTER TABLE background_tasks ADD CONSTRAINT background_tasks_endpoint_named
    CHECK (kind > 2 OR (app_id IS NOT NULL AND endpoint_id IS NOT NULL));

-- App-portal tokens are signed, not stored; these rows refuse some before they
-- expire. A token of the application issued before `issued_before`
-- (milliseconds since the epoch) is refused from `effective_at` on, when its
-- session is `session` ('' every session; 'tok:' and a token's id, one token
-- logged out). Rows outlive every token they could refuse by the longest
-- lifetime a token has (30 days), then go.
CREATE TABLE IF NOT EXISTS portal_revocations (
    tenant_id     text NOT NULL,
    app_id        text NOT NULL,
    session       text NOT NULL,
    issued_before bigint NOT NULL,
    effective_at  bigint NOT NULL,
    CONSTRAINT portal_revocations_pkey PRIMARY KEY (tenant_id, app_id, session, issued_before),
    CONSTRAINT portal_revocations_app_fkey FOREIGN KEY (tenant_id, app_id)
        REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS portal_revocations_age ON portal_revocations (issued_before);

-- An application's integrations: named keys a customer gives its third-party
-- tools, each reaching that application as an app-portal token does. The key
-- is kept sealed with the tenant's key (shown back on request) and as a hash
-- (looked up when it authenticates). It lives only while the API key that made
-- it (or last rotated it), `api_key_id`, does: revoking a leaked API key
-- revokes what it made.
CREATE TABLE IF NOT EXISTS integrations (
    tenant_id     text NOT NULL,
    app_id        text NOT NULL,
    id            text NOT NULL,
    name          text NOT NULL,
    feature_flags text[] NOT NULL DEFAULT '{}',
    key_sealed    bytea NOT NULL,
    key_hash      bytea NOT NULL,
    api_key_id    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT integrations_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT integrations_app_fkey FOREIGN KEY (tenant_id, app_id)
        REFERENCES applications (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX IF NOT EXISTS integrations_key ON integrations (tenant_id, key_hash);
CREATE INDEX IF NOT EXISTS integrations_app ON integrations (tenant_id, app_id, id);
