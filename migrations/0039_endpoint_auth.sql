-- How Hookgate authenticates to an endpoint beyond its signature (Svix's
-- `…/endpoint/{id}/oauth`, `…/mtls`, `…/ca`): an OAuth 2 client whose access
-- token goes as `Authorization: Bearer`, a client certificate, a server CA.
--
-- `endpoints.auth_at` says whether an endpoint has any of it (NULL: none, so a
-- delivery of an endpoint without it reads no other row) and when it last
-- changed, which keys the workers' caches. Only added: a process of the previous
-- release neither reads nor writes either, and keeps running (it sends without
-- the token or certificate until it is replaced).
ALTER TABLE endpoints ADD COLUMN IF NOT EXISTS auth_at timestamptz;

CREATE TABLE IF NOT EXISTS endpoint_auth (
    tenant_id        text NOT NULL,
    app_id           text NOT NULL,
    endpoint_id      text NOT NULL,
    -- The OAuth client's settings without its secrets (grant, method, client id,
    -- token URL, scopes, extra parameters and headers); NULL: no OAuth.
    oauth            jsonb,
    -- Sealed with the tenant's key: the client secret, the refresh token, the JWT key.
    oauth_secrets    bytea,
    -- Sealed: the access token last fetched, shared by every worker until it is
    -- due for refresh; NULL when none is held.
    token            bytea,
    token_fetched_at timestamptz,
    token_expires_at timestamptz,
    -- One process fetches a token at a time: the others use the one held (while
    -- valid) or wait; past this time another may fetch.
    token_fetching_until timestamptz,
    -- Why the last fetch failed, and when: attempts meanwhile fail with it rather
    -- than each asking the token server again.
    token_error      text,
    token_error_at   timestamptz,
    -- Sealed: a PEM private key and certificate chain, sent when the endpoint asks.
    mtls_identity    bytea,
    -- A PEM certificate (or several) that the endpoint's certificate must chain
    -- to, in place of the system's roots; NULL: the system's roots.
    server_ca        text,
    -- Equal to the endpoint's `auth_at`: when any part last changed (what workers' caches go by).
    changed_at       timestamptz NOT NULL DEFAULT now(),
    -- When the OAuth client last changed: a token (or a rotated refresh token)
    -- fetched for a client since changed is not kept. A change of the certificate
    -- or CA leaves the token alone.
    oauth_at         timestamptz,
    PRIMARY KEY (tenant_id, app_id, endpoint_id),
    FOREIGN KEY (tenant_id, app_id, endpoint_id) REFERENCES endpoints (tenant_id, app_id, id) ON DELETE CASCADE
);
