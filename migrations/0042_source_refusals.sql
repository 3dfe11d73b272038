-- Svix's ingest log (`GET /ingest/api/v1/source/{id}/log`): the requests a source
-- refused (a bad signature, a malformed body, a quota), kept so that whoever set
-- the source up can see why a provider's deliveries fail. Bounded by
-- construction: a process records at most one refusal per source a second, and
-- each insert trims the source to its newest 100. Only added: a process of the
-- previous release neither reads nor writes it.
CREATE TABLE IF NOT EXISTS source_refusals (
    tenant_id    text NOT NULL,
    source_id    text NOT NULL,
    -- `log` and 22 base-62 digits of a ULID: ordered as made, byte by byte (`C`),
    -- whatever the database's collation (which would fold the digits' cases).
    id           text COLLATE "C" NOT NULL,
    status_code  smallint NOT NULL,
    error_text   text NOT NULL,
    -- The request's headers, credentials redacted.
    headers      jsonb NOT NULL,
    -- The request's body, its first 4 KiB as text.
    payload      text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, source_id, id),
    FOREIGN KEY (tenant_id, source_id) REFERENCES sources (tenant_id, id) ON DELETE CASCADE
);
