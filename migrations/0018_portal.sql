-- The web UI: a tenant's portal branding and framing origins, and the headers an
-- attempt was sent with (custom headers named as sensitive are stored redacted;
-- the rest are what went on the wire).
CREATE TABLE tenant_portals (
    tenant_id   text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    settings    jsonb NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE attempts ADD COLUMN request_headers jsonb;
