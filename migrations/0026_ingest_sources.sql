-- Ingest sources: the Svix Ingest view of a source (`/ingest/api/v1/source`).
-- One store, two views: an ingest source is a row of `sources` with the type Svix
-- names it by, a `uid` and `metadata`, and the token of its `ingestUrl`; its
-- application (made with it, marked here) holds its ingest endpoints. Only adds.
-- The previous release would serve an ingest source at `/in/{id}` without its
-- token, but it cannot admit on this schema (0025, a switch before this, refuses
-- its inserts of keys), so no ingest source is open to it.
ALTER TABLE sources
    ADD COLUMN ingest_type text,
    ADD COLUMN uid text,
    ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}',
    -- The type's settings that are no secret (a cron source's schedule and payload).
    ADD COLUMN ingest_config jsonb NOT NULL DEFAULT '{}',
    -- The current token, sealed (the `ingestUrl` is shown again), and its hash,
    -- which a request's token is compared with; tokens rotated out, as
    -- [{"hash": hex, "until": time}], accepted until their time.
    ADD COLUMN ingest_token bytea,
    ADD COLUMN ingest_token_hash bytea,
    ADD COLUMN ingest_old_tokens jsonb NOT NULL DEFAULT '[]',
    ADD CONSTRAINT sources_ingest_token CHECK ((ingest_type IS NULL) = (ingest_token_hash IS NULL));
CREATE UNIQUE INDEX IF NOT EXISTS sources_uid ON sources (tenant_id, uid) WHERE uid IS NOT NULL;
-- The cron sources every ingress process ticks for (few: read every few seconds).
CREATE INDEX IF NOT EXISTS sources_cron ON sources (id) WHERE ingest_type = 'cron';

ALTER TABLE applications ADD COLUMN ingest_source_id text;
