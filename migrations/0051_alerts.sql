-- Alerts for people: an e-mail or a chat message when an endpoint is disabled,
-- fails for a while, or exhausts a message's attempts. Only added: a process of
-- the previous release neither reads nor writes these tables (its notices raise
-- no alert until it is gone).

-- Who is told, per tenant; the operator's row (tenant `operator`) is told of
-- every tenant. An application's own addresses stay in `applications.alert_email`.
CREATE TABLE IF NOT EXISTS alert_settings (
    tenant_id        text PRIMARY KEY,
    -- Comma-separated addresses, checked by the API.
    email            text,
    -- The chat webhook's URL, sealed with the tenant's key (it is a secret:
    -- a Slack incoming-webhook URL lets anyone post).
    chat_url_sealed  bytea,
    -- The conditions told (`endpoint.disabled`, …); NULL: all of them.
    events           text[],
    -- How long an endpoint fails before it is told; NULL: the operator's default.
    failing_secs     integer,
    -- At most one alert per condition and subject in this long; NULL: the default.
    window_secs      integer,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- When each condition was last told, per subject (an endpoint): the debounce.
-- `held` counts what was not told since; the next alert says how many.
CREATE TABLE IF NOT EXISTS alert_marks (
    tenant_id  text NOT NULL,
    condition  text NOT NULL,
    subject    text NOT NULL,
    sent_at    timestamptz NOT NULL,
    held       integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, condition, subject)
);
-- Pruning marks older than any window reads them by age.
CREATE INDEX IF NOT EXISTS alert_marks_by_age ON alert_marks (sent_at);

-- Alerts to send, one row per target (an application's addresses, the tenant's
-- addresses or chat, the operator's), written in the transaction that saw the
-- condition and deleted once sent (or given up). The address is read when sent.
CREATE TABLE IF NOT EXISTS alert_outbox (
    tenant_id      text NOT NULL,
    id             bigint GENERATED ALWAYS AS IDENTITY,
    -- `app-email`, `tenant-email`, `tenant-chat`, `operator-email`, `operator-chat`.
    target         text NOT NULL,
    condition      text NOT NULL,
    app_id         text,
    subject        text NOT NULL,
    -- What the alert says: names, URLs, times (built when raised).
    detail         jsonb NOT NULL,
    -- Conditions held back by the window since the last alert of this one.
    held           integer NOT NULL DEFAULT 0,
    created_at     timestamptz NOT NULL DEFAULT now(),
    due_at         timestamptz NOT NULL DEFAULT now(),
    attempts       smallint NOT NULL DEFAULT 0,
    -- The sender holding it, until when: a crashed sender's rows are taken again.
    claim          bigint,
    claimed_until  timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX IF NOT EXISTS alert_outbox_due ON alert_outbox (due_at);
