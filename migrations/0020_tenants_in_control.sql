-- Tenants in control: quotas, usage an agency can bill, operational webhooks.

-- Per-tenant quota overrides: {"apiRequestsPerSecond", "messagesPerSecond",
-- "messagesPerDay", "inboundPerSecond", "endpointsPerApp", "appsPerTenant"}, each
-- a number (0: no limit) or absent (the operator's default).
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS quotas jsonb NOT NULL DEFAULT '{}';

-- Usage per tenant and UTC day, counted in the transactions that commit what it
-- counts. A day has a few rows per tenant (`shard`, chosen at random per
-- statement) so that concurrent commits of one tenant seldom wait on one row; a
-- day's usage is their sum. Never pruned with the data: small, and billed from.
CREATE TABLE IF NOT EXISTS usage_days (
    tenant_id            text NOT NULL,
    day                  date NOT NULL,
    shard                smallint NOT NULL,
    inbound_accepted     bigint NOT NULL DEFAULT 0,
    inbound_duplicates   bigint NOT NULL DEFAULT 0,
    rejected_signature   bigint NOT NULL DEFAULT 0,
    rejected_invalid     bigint NOT NULL DEFAULT 0,
    rejected_quota       bigint NOT NULL DEFAULT 0,
    messages_created     bigint NOT NULL DEFAULT 0,
    attempts_succeeded   bigint NOT NULL DEFAULT 0,
    attempts_failed      bigint NOT NULL DEFAULT 0,
    bytes_in             bigint NOT NULL DEFAULT 0,
    bytes_out            bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, shard)
);

-- The daily message cap: messages reserved per tenant and UTC day, one row each,
-- raised only while under the cap (the row lock makes the check exact across
-- instances). A reservation is given back only when its message surely was not
-- created (after a timeout it is kept: the cap errs towards fewer).
CREATE TABLE IF NOT EXISTS quota_days (
    tenant_id  text NOT NULL,
    day        date NOT NULL,
    messages   bigint NOT NULL,
    PRIMARY KEY (tenant_id, day)
);

-- A tenant's operational webhooks live in one hidden application of its own: its
-- endpoints are the operational webhook endpoints, its messages the operational
-- events, delivered by the same outbox and worker as any message. The API's
-- application lookups never see it.
ALTER TABLE applications ADD COLUMN IF NOT EXISTS operational boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX IF NOT EXISTS applications_one_operational ON applications (tenant_id) WHERE operational;

-- The operator's own tenant, home of the operational webhook endpoints that
-- receive every tenant's events. It has no API key and is listed nowhere.
INSERT INTO tenants (id, name) VALUES ('tnt_00000000000000000000000000', 'operator')
ON CONFLICT (id) DO NOTHING;
