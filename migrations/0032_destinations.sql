-- Destinations: endpoints that are not a plain HTTP receiver (a RabbitMQ
-- exchange, a Postgres table, …). They are rows of `endpoints`, so the one
-- fan-out rule, the claim, retries, the attempt log and the failing/disabled
-- states are theirs too; `kind` says how the worker hands a message over.
-- 0 is an HTTP endpoint (every existing row: a constant default costs no rewrite).
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS kind smallint NOT NULL DEFAULT 0;
-- The destination's configuration (its `config`, credentials included), a JSON
-- object sealed with the endpoint's key; NULL for HTTP endpoints.
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS destination bytea;
-- Svix's batchSize and maxWaitSecs for the destination; NULL for HTTP endpoints.
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS batch_size integer;
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS max_wait_secs integer;
ALTER TABLE endpoints DROP CONSTRAINT IF EXISTS endpoints_kind_known;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_kind_known
    CHECK (kind BETWEEN 0 AND 8 AND (kind = 0) = (destination IS NULL)) NOT VALID;
ALTER TABLE endpoints VALIDATE CONSTRAINT endpoints_kind_known;
