-- Background tasks: work a request starts and the workers finish in bounded
-- steps (endpoint replays and recoveries). Each step runs in one transaction that holds the
-- task's row, does one batch and moves `cursor` past it, so a step is done
-- whole or not at all: a process dying mid-task loses nothing and repeats
-- nothing, and two workers never run the same step.
CREATE TABLE IF NOT EXISTS background_tasks (
    tenant_id    text NOT NULL,
    id           text NOT NULL,
    kind         smallint NOT NULL,          -- 0 endpoint.replay, 1 endpoint.bulk-replay, 2 endpoint.recover
    status       smallint NOT NULL DEFAULT 0, -- 0 running, 1 finished, 2 failed
    app_id       text NOT NULL,
    endpoint_id  text NOT NULL,
    since        timestamptz NOT NULL,
    until        timestamptz NOT NULL,
    filter       jsonb NOT NULL DEFAULT '{}', -- bulk replay's filters, as the request gave them
    cursor       text NOT NULL DEFAULT '',    -- the last message id a step looked at
    scanned      bigint NOT NULL DEFAULT 0,
    sent         bigint NOT NULL DEFAULT 0,
    failure      text,
    tries        smallint NOT NULL DEFAULT 0, -- steps in a row that failed
    failing_since timestamptz,               -- when the first of them failed
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT background_tasks_pkey PRIMARY KEY (tenant_id, id),
    CONSTRAINT background_tasks_app_fkey FOREIGN KEY (tenant_id, app_id)
        REFERENCES applications (tenant_id, id) ON DELETE CASCADE,
    CONSTRAINT background_tasks_kind_known CHECK (kind IN (0, 1, 2)),
    CONSTRAINT background_tasks_status_known CHECK (status IN (0, 1, 2))
);
-- The runner's pick: the running task stepped least lately, whatever its tenant.
CREATE INDEX IF NOT EXISTS background_tasks_next ON background_tasks (updated_at) WHERE status = 0;
-- Ended tasks, for the pruner.
CREATE INDEX IF NOT EXISTS background_tasks_ended ON background_tasks (updated_at) WHERE status <> 0;
-- A tenant's and an application's running tasks, counted against their caps.
CREATE INDEX IF NOT EXISTS background_tasks_running ON background_tasks (tenant_id, app_id) WHERE status = 0;
