-- What the console needs: a label on each API key (which integration or person
-- holds it), and an audit log of the operator's and the tenant's actions (who,
-- what, when), kept as long as the tenant's messages. Only added: a process of
-- the previous release neither reads nor writes either.
-- A brief lock on api_keys, waited for at most 10 s: behind a long transaction
-- the upgrade fails and is run again, rather than every key lookup queueing.
SET LOCAL lock_timeout = '10s';
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS label text;

CREATE TABLE IF NOT EXISTS audit_log (
    tenant_id   text NOT NULL,
    -- `aud_` and a ULID: ordered as made, byte by byte (`C`), whatever the
    -- database's collation.
    id          text COLLATE "C" NOT NULL,
    -- `operator`, `key:<key id>`, `portal:<app id>`, `message-token:<app id>`,
    -- `poller:<endpoint id>`.
    actor       text NOT NULL,
    method      text NOT NULL,
    -- The request's path, never its query string (where nothing secret goes).
    path        text NOT NULL,
    status_code smallint NOT NULL,
    request_id  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
-- Pruning by age across tenants reads each tenant's oldest rows through the key.
