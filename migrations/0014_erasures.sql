-- Applications being erased (a GDPR request for one customer's data): the
-- request erases what it can within its time, the pruners erase the rest in
-- bounded batches, and the application row goes last, with this one.
CREATE TABLE erasures (
    tenant_id     text NOT NULL REFERENCES tenants (id),
    app_id        text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, app_id)
);
