-- Endpoint transformations: a tenant's JavaScript `handler(webhook)` run on each
-- delivery before it is signed. Off for every tenant until the operator turns
-- them on (`tenants.transformations`).
CREATE TABLE IF NOT EXISTS endpoint_transformations (
    tenant_id    text NOT NULL,
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    code         text NOT NULL DEFAULT '',
    enabled      boolean NOT NULL DEFAULT false,
    variables    bytea,                      -- a JSON object of strings, sealed with the endpoint's key
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT endpoint_transformations_pkey PRIMARY KEY (tenant_id, app_id, endpoint_id),
    CONSTRAINT endpoint_transformations_endpoint_fkey FOREIGN KEY (tenant_id, app_id, endpoint_id)
        REFERENCES endpoints (tenant_id, app_id, id) ON DELETE CASCADE
);
-- When the endpoint's transformation (enabled, with code) last changed; NULL when
-- it has none. The claim reads it with the endpoint: a worker loads the code only
-- for an endpoint that has one, and again only when this moves.
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS transformation_at timestamptz;
-- The operator's switch (off by default), and the tenant's own (on unless it
-- turns it off): transformations run while both are on.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS transformations boolean NOT NULL DEFAULT false;
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS transformations_off boolean NOT NULL DEFAULT false;
-- A delivery its transformation canceled (`cancel = true`): status 4, as Svix's
-- MessageStatus has it. Every existing row met the old check, so the new one
-- need not scan them.
ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_status_known;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_known CHECK (status IN (0, 1, 2, 3, 4)) NOT VALID;
-- Validated apart: it reads every row but blocks no writes while it does.
ALTER TABLE deliveries VALIDATE CONSTRAINT deliveries_status_known;
