-- Svix's poller tokens (`…/auth/app/{app}/poller/{endpoint}/token`, `…/token/rotate`):
-- a token that may only poll one polling endpoint. The token is signed, not
-- stored; what is stored is which generation of it is current (and which one
-- before it still works, until when), the key that made it (the token dies with
-- that key) and its times, so `GET …/token` answers the same token again. Only
-- added: a process of the previous release neither reads nor writes it, and
-- refuses such tokens (they fail closed).
CREATE TABLE IF NOT EXISTS poller_tokens (
    tenant_id       text NOT NULL,
    app_id          text NOT NULL,
    endpoint_id     text NOT NULL,
    generation      integer NOT NULL,
    key_id          text NOT NULL,
    issued_ms       bigint NOT NULL,
    expires_at      timestamptz NOT NULL,
    old_generation  integer,
    old_until       timestamptz,
    PRIMARY KEY (tenant_id, app_id, endpoint_id),
    FOREIGN KEY (tenant_id, app_id, endpoint_id) REFERENCES endpoints (tenant_id, app_id, id) ON DELETE CASCADE
);
